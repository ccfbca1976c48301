"""Collect concurrent single-item awaits into one batch call.

verl's reward loop awaits ``run_single`` for every sample of a batch at once;
scoring them one HTTP request each wastes the server's batching.  A
:class:`Coalescer` holds the items that arrive within a short window (or until
``max_batch`` are waiting) and hands them to one ``batch_fn`` call; each caller
gets its own result back, or its own exception.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from audio_reward.futures import fail_all, settle

T = TypeVar("T")
R = TypeVar("R")

BatchFn = Callable[[Sequence[T]], Awaitable[Sequence["R | BaseException"]]]


@dataclass
class _Pending(Generic[T, R]):
    item: T
    future: asyncio.Future[R]


@dataclass
class Coalescer(Generic[T, R]):
    """Batch concurrent :meth:`submit` calls into ``batch_fn`` calls.

    ``batch_fn`` receives the items in arrival order and returns one entry per
    item: a result, or an exception instance that is raised to that item's
    caller only.  An exception raised by ``batch_fn`` itself fails every item
    of that batch.
    """

    batch_fn: BatchFn
    window_s: float = 0.005
    max_batch: int = 64
    _pending: list[_Pending[T, R]] = field(default_factory=list, init=False)
    _timer: asyncio.TimerHandle | None = field(default=None, init=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        if self.window_s < 0:
            raise ValueError(f"window_s must be >= 0, got {self.window_s}")
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {self.max_batch}")

    async def submit(self, item: T) -> R:
        """Queue ``item`` and wait for its result from the next batch call."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append(_Pending(item, future))
        if len(self._pending) >= self.max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.window_s, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if not batch:
            return
        task = asyncio.get_running_loop().create_task(self._run(batch))
        # Keep a reference: the loop holds tasks only weakly.
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[_Pending[T, R]]) -> None:
        futures = [p.future for p in batch]
        try:
            results = await self.batch_fn([p.item for p in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"batch function returned {len(results)} results for {len(batch)} items")
        except BaseException as exc:
            fail_all(futures, exc)
            if not isinstance(exc, Exception):
                raise
            return
        settle(futures, results)  # a future already done belongs to a caller that was cancelled
