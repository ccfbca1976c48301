"""Liveness and readiness probes; never behind the API key."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from ..errors import error_body
from ..service.engine_client import EngineClient
from ..service.signals import SignalService
from .deps import get_engine_client, get_signals
from .responses import OrjsonResponse, error_responses

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness", response_class=OrjsonResponse)
async def healthz() -> OrjsonResponse:
    """200 while the process serves HTTP, loaded or not."""
    return OrjsonResponse({"status": "ok"})


@router.get("/readyz", summary="Readiness", response_class=OrjsonResponse, responses=error_responses(503))
async def readyz(engine_client: Annotated[EngineClient, Depends(get_engine_client)],
                 signals: Annotated[SignalService, Depends(get_signals)]) -> OrjsonResponse:
    """200 once the model is loaded and warmed up; 503 (protocol error shape) before that."""
    state = engine_client.state
    if state.ready:
        models = {name: model.info.model_id for name, model in signals.models.items()}
        return OrjsonResponse({"status": "ready", "model": engine_client.info.model_id, "signals": models})
    if state.load_error:
        body = error_body("load_failed", f"the ASR model failed to load ({state.load_error}); see the server log",
                          retryable=False)
    else:
        body = error_body("not_ready", "the ASR model is loading", retryable=True)
    return OrjsonResponse(body, status_code=503, headers={"Retry-After": "5"})
