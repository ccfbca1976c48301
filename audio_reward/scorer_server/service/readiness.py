"""Whether the engine is loaded: the one piece of the server that changes after start-up."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import NotReadyError
from .scheduler import Scheduler


@dataclass
class Readiness:
    """The engine's scheduler once the engine is loaded and warm, or why it is not.

    The lifespan fills it in (:mod:`..app`); the pipeline asks it for the
    scheduler, ``/readyz`` and ``/v1/info`` report it.
    """

    ready: bool = False
    started_scheduler: Scheduler | None = None
    """The micro-batch scheduler, or the straight-through dispatcher of a self-scheduling engine."""
    load_error: str | None = None
    """The exception type that stopped the engine loading (the message stays in the log)."""
    batching_note: str | None = None
    """Why the scheduler's batch size differs from ``max_batch_size``, when it does."""
    started_at: float = field(default_factory=time.time)
    on_fatal: Callable[[], None] | None = None
    """Called when the engine cannot load; the CLI uses it to stop the server."""

    def scheduler(self) -> Scheduler:
        """The scheduler to submit to; 503 with ``Retry-After`` while loading or after a failed load."""
        if self.started_scheduler is None or not self.ready:
            if self.load_error:
                raise NotReadyError(f"the ASR model failed to load ({self.load_error}); see the server log",
                                    retry_after_s=30)
            raise NotReadyError("the ASR model is still loading", retry_after_s=5)
        return self.started_scheduler
