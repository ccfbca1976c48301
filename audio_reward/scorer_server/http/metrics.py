"""``GET /metrics``: Prometheus text exposition."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .deps import Parts

router = APIRouter(tags=["observability"])


@router.get("/metrics", response_class=Response, summary="Prometheus metrics")
async def metrics(parts: Parts) -> Response:
    parts.metrics.queue_depth.set(parts.engine_client.queued)
    return Response(generate_latest(parts.metrics.registry), media_type=CONTENT_TYPE_LATEST)
