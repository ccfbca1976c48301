"""``GET /metrics``: Prometheus text exposition."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..state import get_state

router = APIRouter(tags=["observability"])


@router.get("/metrics", response_class=Response, summary="Prometheus metrics")
async def metrics(request: Request) -> Response:
    state = get_state(request)
    state.metrics.queue_depth.set(state.batcher.queued if state.batcher else 0)
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
