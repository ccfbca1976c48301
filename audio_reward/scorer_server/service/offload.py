"""CPU work of many requests in one worker-thread hop.

Scoring a transcript (normalization, CER/WER, the reward) must not run on the
event loop, but one thread hop per request costs about as much as scoring a
short prompt.  The scheduler answers a whole engine batch at once, so its
requests ask for their scoring in the same turn of the loop: :class:`Offload`
collects what is asked within one turn and runs it in a single hop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool

from audio_reward.futures import fail_all, settle

T = TypeVar("T")
_Job = tuple[Callable[[], Any], "asyncio.Future[Any]"]


def _run_all(jobs: list[Callable[[], Any]]) -> list[Any]:
    """Each job's result, or the exception it raised (for :func:`settle` to raise to that job's caller)."""
    out: list[Any] = []
    for job in jobs:
        try:
            out.append(job())
        except Exception as exc:  # noqa: BLE001 - handed to the job's own caller
            out.append(exc)
    return out


class Offload:
    """Runs callables in a worker thread; those submitted in the same loop turn share one hop."""

    def __init__(self) -> None:
        self._pending: list[_Job] = []
        self._flushes: set[asyncio.Task[None]] = set()

    async def run(self, job: Callable[[], T]) -> T:
        """``job()``, computed in a worker thread; its exception is raised here."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._pending.append((job, future))
        if len(self._pending) == 1:
            # Scheduled behind the wake-ups already queued, so requests answered together hop together.
            loop.call_soon(self._flush, loop)
        return await future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        jobs, self._pending = self._pending, []
        task = loop.create_task(self._hop(jobs))
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    @staticmethod
    async def _hop(jobs: list[_Job]) -> None:
        futures = [future for _, future in jobs]
        try:
            outcomes = await run_in_threadpool(_run_all, [job for job, _ in jobs])
        except BaseException as exc:  # the hop itself failed (cancelled at shutdown): every caller hears of it
            fail_all(futures, exc if isinstance(exc, Exception) else RuntimeError("scoring was cancelled"))
            raise
        settle(futures, outcomes)  # a future already done belongs to a request cancelled meanwhile
