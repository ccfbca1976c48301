"""``GET /v1/info``: what this server scores with, so results can be reproduced."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from audio_reward import __version__
from audio_reward.protocol import PROTOCOL_VERSION, SUPPORTED_VERSIONS

from ..config import ServerConfig
from ..service.pipeline import ScoringPipeline
from ..service.readiness import Readiness
from .auth import require_api_key
from .deps import get_pipeline, get_readiness, get_settings
from .responses import OrjsonResponse, error_responses

router = APIRouter(tags=["info"], dependencies=[Depends(require_api_key)])


@router.get("/v1/info", summary="Server, model and scoring configuration", response_class=OrjsonResponse,
            responses=error_responses(401))
async def info(s: Annotated[ServerConfig, Depends(get_settings)],
               pipeline: Annotated[ScoringPipeline, Depends(get_pipeline)],
               readiness: Annotated[Readiness, Depends(get_readiness)]) -> OrjsonResponse:
    engine = pipeline.engine.info
    batcher = readiness.batcher
    body: dict[str, Any] = {
        "server_version": __version__,
        "protocol_version": PROTOCOL_VERSION,
        "supported_protocol_versions": list(SUPPORTED_VERSIONS),
        "ready": readiness.ready,
        "uptime_s": round(time.time() - readiness.started_at, 3),
        "engine": {
            "name": engine.engine,
            "model_id": engine.model_id,
            "weights_sha256": engine.weights_sha256,
            "device": engine.device,
            "compute_type": engine.compute_type,
            "beam_size": s.beam_size,
            "extra": dict(engine.extra),
            "options": dict(pipeline.engine.options),
        },
        "preset": s.preset,
        "normalizer": pipeline.normalizer.name,
        "default_language": s.language,
        "reward": pipeline.policy.model_dump(),
        "limits": {
            "max_audio_seconds": s.max_audio_seconds,
            "max_body_bytes": s.max_body_bytes,
            "max_batch_items": s.max_batch_items,
            "max_prompt_chars": s.max_prompt_chars,
            "max_audio_bytes": s.max_audio_bytes,
            "max_batch_audio_bytes": s.max_batch_audio_bytes,
            "max_queue": s.max_queue,
            "request_timeout_s": s.request_timeout_s,
        },
        "batching": {
            "engine_batches": pipeline.engine.prefers_batches,
            "engine_schedules_itself": pipeline.engine.schedules_itself,
            "max_batch_size": batcher.max_batch_size if batcher else s.max_batch_size,
            "max_wait_ms": batcher.max_wait_s * 1000 if batcher else s.max_wait_ms,
            **(batcher.describe() if batcher else {}),
            "max_batch_size_setting": s.max_batch_size,
            "note": readiness.batching_note,
        },
        "auth": s.api_key is not None,
        "endpoints": ["/v1/score", "/score", "/v1/score/batch", "/v1/audio/transcriptions", "/v1/models",
                      "/v1/info", "/healthz", "/readyz", "/metrics"],
    }
    return OrjsonResponse(body)
