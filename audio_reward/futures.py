"""Collecting the work of many callers into one call, and settling each caller's future from it.

The scheduler, the server's CPU offload and the trainer's coalescer each run one call for many waiting callers and
hand each caller its own outcome. The rule is the same everywhere: a caller that gave up (its future is done,
cancelled) is skipped, an outcome that is an exception is raised to that caller only, and a failure of the call
itself reaches every caller of that call. :class:`Batcher` is the collecting half, written once: the offload and
the coalescer differ only in how long they collect.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["Batcher", "fail_all", "settle"]


def settle(futures: Sequence[asyncio.Future[Any]], outcomes: Sequence[object]) -> None:
    """Give each future its outcome, in order: an exception instance is raised to that caller, anything else is
    its result. Futures already done are skipped. The lengths must match."""
    if len(futures) != len(outcomes):
        raise ValueError(f"{len(outcomes)} outcomes for {len(futures)} callers")
    for future, outcome in zip(futures, outcomes, strict=True):
        if future.done():
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


def fail_all(futures: Iterable[asyncio.Future[Any]], exc: BaseException) -> None:
    """Raise ``exc`` to every caller still waiting."""
    for future in futures:
        if not future.done():
            future.set_exception(exc)


class Batcher(Generic[T, R]):
    """Collects what concurrent callers :meth:`submit` and answers them all from one ``run`` call.

    ``run`` gets the items in arrival order and returns one outcome per item: a result, or an exception raised
    to that item's caller only; an exception of ``run`` itself fails every caller of that call. The items are
    collected for ``window_s`` seconds after the first, or, with ``window_s=None``, until the loop's next turn
    (behind the wake-ups already queued, so callers woken together are answered together); ``max_batch`` items
    go at once.  Both bounds come from validated settings (``window_s >= 0``, ``max_batch >= 1``).
    """

    def __init__(self, run: Callable[[list[T]], Awaitable[Sequence[R | BaseException]]],
                 window_s: float | None = None, max_batch: int | None = None) -> None:
        self._run, self.window_s, self.max_batch = run, window_s, max_batch
        self._items: list[T] = []
        self._futures: list[asyncio.Future[R]] = []
        self._timer: asyncio.Handle | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # the loop holds tasks only weakly

    async def submit(self, item: T) -> R:
        """Queue ``item`` and wait for its outcome from the next ``run`` call."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._items.append(item)
        self._futures.append(future)
        if self.max_batch is not None and len(self._items) >= self.max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = (loop.call_soon(self._flush) if self.window_s is None
                           else loop.call_later(self.window_s, self._flush))
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        items, futures, self._items, self._futures = self._items, self._futures, [], []
        if items:
            task = asyncio.get_running_loop().create_task(self._answer(items, futures))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _answer(self, items: list[T], futures: list[asyncio.Future[R]]) -> None:
        try:
            settle(futures, await self._run(items))
        except BaseException as exc:
            # Cancelled (the loop shutting down): the callers hear an error of their own, not a cancellation.
            fail_all(futures, exc if isinstance(exc, Exception) else RuntimeError("the batch call was cancelled"))
            if not isinstance(exc, Exception):
                raise
