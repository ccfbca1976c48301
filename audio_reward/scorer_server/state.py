"""What one running server holds: settings, engine, batcher, metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from fastapi import Request

from .batcher import Scheduler
from .engines.base import ASREngine
from .metrics import ServerMetrics
from .score.offload import Offload
from .score.recent import RecentResults
from audio_reward.scoring import Normalizer, RewardPolicy
from .settings import ServerSettings


@dataclass
class ServerState:
    """Shared by every request of one app; ``ready`` flips once the engine is warm."""

    settings: ServerSettings
    engine: ASREngine
    policy: RewardPolicy
    normalizer: Normalizer
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    engine_preloaded: bool = False
    """True when the engine came loaded and warm: the server skips its own load."""
    batcher: Scheduler | None = None
    """The micro-batcher, or the straight-through dispatcher of a self-scheduling engine."""
    offload: Offload = field(default_factory=Offload)
    """Runs scoring off the event loop."""
    recent: RecentResults | None = None
    """Answers by request id for retried requests; None when ``dedup_cache_size`` is 0."""
    batching_note: str | None = None
    """Why the batcher's batch size differs from ``max_batch_size``, when it does."""
    ready: bool = False
    load_error: str | None = None
    started_at: float = field(default_factory=time.time)
    on_fatal: Callable[[], None] | None = None
    """Called when the engine cannot load; the CLI uses it to stop the server."""


def get_state(request: Request) -> ServerState:
    return request.app.state.scorer  # type: ignore[no-any-return]
