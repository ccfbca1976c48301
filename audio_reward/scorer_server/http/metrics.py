"""``GET /metrics``: Prometheus text exposition."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..service.engine_client import EngineClient
from ..service.prometheus import ServerMetrics
from .deps import get_engine_client, get_metrics

router = APIRouter(tags=["observability"])


@router.get("/metrics", response_class=Response, summary="Prometheus metrics")
async def metrics(metrics: Annotated[ServerMetrics, Depends(get_metrics)],
                  engine_client: Annotated[EngineClient, Depends(get_engine_client)]) -> Response:
    metrics.queue_depth.set(engine_client.queued)
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
