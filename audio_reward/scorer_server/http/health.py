"""Liveness and readiness probes; never behind the API key."""

from __future__ import annotations

from fastapi import APIRouter

from ..errors import error_body
from .deps import Parts
from .responses import OrjsonResponse, error_responses

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness", response_class=OrjsonResponse)
async def healthz() -> OrjsonResponse:
    """200 while the process serves HTTP, loaded or not."""
    return OrjsonResponse({"status": "ok"})


@router.get("/readyz", summary="Readiness", response_class=OrjsonResponse, responses=error_responses(503))
async def readyz(parts: Parts) -> OrjsonResponse:
    """200 once the model is loaded and warmed up; 503 (protocol error shape) before that."""
    engine_client = parts.engine_client
    state = engine_client.state
    if state.ready:
        models = {name: model.info.model_id for name, model in parts.signals.models.items()}
        return OrjsonResponse({"status": "ready", "model": engine_client.info.model_id, "signals": models})
    if state.load_error:
        body = error_body("load_failed", f"the ASR model failed to load ({state.load_error}); see the server log",
                          retryable=False)
    else:
        body = error_body("not_ready", "the ASR model is loading", retryable=True)
    return OrjsonResponse(body, status_code=503, headers={"Retry-After": "5"})
