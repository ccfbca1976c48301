"""CPU work of many requests in one worker-thread hop.

Scoring a transcript (normalization, CER/WER, the reward) must not run on the
event loop, but one thread hop per request costs about as much as scoring a
short prompt.  The scheduler answers a whole engine batch at once, so its
requests ask for their scoring in the same turn of the loop: :class:`Offload`
collects what is asked within one turn and runs it in a single hop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from starlette.concurrency import run_in_threadpool

from audio_reward.futures import Batcher

T = TypeVar("T")


def _run_all(jobs: list[Callable[[], Any]]) -> list[Any]:
    """Each job's result, or the exception it raised (raised to that job's caller only)."""
    out: list[Any] = []
    for job in jobs:
        try:
            out.append(job())
        except Exception as exc:  # noqa: BLE001 - handed to the job's own caller
            out.append(exc)
    return out


class Offload(Batcher[Callable[[], Any], Any]):
    """Runs callables in a worker thread; those submitted in the same loop turn share one hop."""

    def __init__(self) -> None:
        super().__init__(lambda jobs: run_in_threadpool(_run_all, jobs), window_s=None)

    async def run(self, job: Callable[[], T]) -> T:
        """``job()``, computed in a worker thread; its exception is raised here."""
        return cast(T, await self.submit(job))
