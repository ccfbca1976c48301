"""What the server scores with (``GET /v1/info``), so results can be reproduced."""

from __future__ import annotations

import time
from collections.abc import Sequence

from audio_reward import __version__
from audio_reward.protocol import PROTOCOL_VERSION, SUPPORTED_VERSIONS, InfoResponse
from audio_reward.protocol.models import LimitsDescription
from audio_reward.scoring import Normalizer

from ..config import ServerConfig
from .engine_client import EngineClient
from .signals import SignalService


def describe_server(settings: ServerConfig, engine_client: EngineClient, normalizer: Normalizer, signals: SignalService,
                    endpoints: Sequence[str]) -> InfoResponse:
    """The ``/v1/info`` body: versions, engine, scoring, limits and batching, read at each request; the engine's
    and scheduler's parts change once it has loaded.

    ``endpoints`` are the app's routes (its concrete paths), so the list a client reads to
    find the batch endpoint is the one the server serves.
    """
    engine = engine_client.info
    return InfoResponse.model_validate({
        "server_version": __version__,
        "protocol_version": PROTOCOL_VERSION,
        "supported_protocol_versions": list(SUPPORTED_VERSIONS),
        "ready": engine_client.state.ready,
        "uptime_s": round(time.time() - engine_client.state.started_at, 3),
        "engine": {
            "name": engine.engine,
            "model_id": engine.model_id,
            "weights_sha256": engine.weights_sha256,
            "device": engine.device,
            "compute_type": engine.compute_type,
            "beam_size": settings.beam_size,
            "extra": dict(engine.extra),
            "options": engine_client.options,
        },
        "preset": settings.preset,
        "normalizer": normalizer.name,
        "default_language": settings.language,
        "reward": settings.reward.model_dump(),
        "limits": settings.model_dump(include=set(LimitsDescription.model_fields)),  # each a setting of its name
        "batching": engine_client.describe_batching(),
        "throughput": engine_client.describe_throughput(),
        "signals": signals.describe(),
        "auth": settings.api_key is not None,
        "endpoints": list(endpoints),
    })
