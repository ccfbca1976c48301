"""``GET /v1/info``: what this server scores with, so results can be reproduced."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from fastapi import APIRouter, Depends, Request

from audio_reward import __version__
from audio_reward.protocol import PROTOCOL_VERSION, SUPPORTED_VERSIONS

from ..auth import require_api_key
from ..responses import OrjsonResponse, error_responses
from ..state import get_state

router = APIRouter(tags=["info"], dependencies=[Depends(require_api_key)])


@router.get("/v1/info", summary="Server, model and scoring configuration", response_class=OrjsonResponse,
            responses=error_responses(401))
async def info(request: Request) -> OrjsonResponse:
    state = get_state(request)
    s = state.settings
    engine = state.engine.info
    body: dict[str, Any] = {
        "server_version": __version__,
        "protocol_version": PROTOCOL_VERSION,
        "supported_protocol_versions": list(SUPPORTED_VERSIONS),
        "ready": state.ready,
        "uptime_s": round(time.time() - state.started_at, 3),
        "engine": {
            "name": engine.engine,
            "model_id": engine.model_id,
            "weights_sha256": engine.weights_sha256,
            "device": engine.device,
            "compute_type": engine.compute_type,
            "beam_size": s.beam_size,
            "extra": dict(engine.extra),
            "options": dict(state.engine.options),
        },
        "preset": s.preset,
        "normalizer": state.normalizer.name,
        "default_language": s.language,
        "reward": dataclasses.asdict(state.policy),
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
            "engine_batches": state.engine.prefers_batches,
            "engine_schedules_itself": state.engine.schedules_itself,
            "max_batch_size": state.batcher.max_batch_size if state.batcher else s.max_batch_size,
            "max_wait_ms": state.batcher.max_wait_s * 1000 if state.batcher else s.max_wait_ms,
            **(state.batcher.describe() if state.batcher else {}),
            "max_batch_size_setting": s.max_batch_size,
            "note": state.batching_note,
        },
        "auth": s.api_key is not None,
        "endpoints": ["/v1/score", "/score", "/v1/score/batch", "/v1/audio/transcriptions", "/v1/models",
                      "/v1/info", "/healthz", "/readyz", "/metrics"],
    }
    return OrjsonResponse(body)
