"""``GET /v1/info``: what this server scores with, so results can be reproduced."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from audio_reward.protocol import InfoResponse

from ..service.info import describe_server
from .auth import require_api_key
from .deps import Parts
from .responses import OrjsonResponse, error_responses

router = APIRouter(tags=["info"], dependencies=[Depends(require_api_key)])


@router.get("/v1/info", summary="Server, model and scoring configuration", response_class=OrjsonResponse,
            responses={200: {"model": InfoResponse, "description": "What the server scores with."},
                       **error_responses(401)})
async def info(parts: Parts) -> OrjsonResponse:
    return OrjsonResponse(describe_server(parts.settings, parts.engine_client, parts.pipeline.normalizer,
                                          parts.signals, parts.endpoints))
