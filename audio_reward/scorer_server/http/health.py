"""Liveness and readiness probes; never behind the API key."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from ..engines.base import ASREngine
from ..errors import error_body
from ..service.readiness import Readiness
from ..service.signals import SignalService
from .deps import get_engine, get_readiness, get_signals
from .responses import OrjsonResponse, error_responses

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness", response_class=OrjsonResponse)
async def healthz() -> OrjsonResponse:
    """200 while the process serves HTTP, loaded or not."""
    return OrjsonResponse({"status": "ok"})


@router.get("/readyz", summary="Readiness", response_class=OrjsonResponse, responses=error_responses(503))
async def readyz(readiness: Annotated[Readiness, Depends(get_readiness)],
                 engine: Annotated[ASREngine, Depends(get_engine)],
                 signals: Annotated[SignalService, Depends(get_signals)]) -> OrjsonResponse:
    """200 once the model is loaded and warmed up; 503 (protocol error shape) before that."""
    if readiness.ready:
        models = {name: model.info.model_id for name, model in signals.models.items()}
        return OrjsonResponse({"status": "ready", "model": engine.info.model_id, "signals": models})
    if readiness.load_error:
        body = error_body("load_failed", f"the ASR model failed to load ({readiness.load_error}); see the server log",
                          retryable=False)
    else:
        body = error_body("not_ready", "the ASR model is loading", retryable=True)
    return OrjsonResponse(body, status_code=503, headers={"Retry-After": "5"})
