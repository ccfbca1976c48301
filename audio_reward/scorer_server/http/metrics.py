"""``GET /metrics``: Prometheus text exposition."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..service.prometheus import ServerMetrics
from ..service.readiness import Readiness
from .deps import get_metrics, get_readiness

router = APIRouter(tags=["observability"])


@router.get("/metrics", response_class=Response, summary="Prometheus metrics")
async def metrics(metrics: Annotated[ServerMetrics, Depends(get_metrics)],
                  readiness: Annotated[Readiness, Depends(get_readiness)]) -> Response:
    metrics.queue_depth.set(readiness.started_scheduler.queued if readiness.started_scheduler else 0)
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
