"""Settling the futures of work done on behalf of many callers.

The scheduler, the CPU offload and the trainer's coalescer each run one call for many waiting callers and
hand each caller its own outcome. The rule is the same everywhere: a caller that gave up (its future is done,
cancelled) is skipped, an outcome that is an exception is raised to that caller only, and a failure of the call
itself reaches every caller of that call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["fail_all", "settle"]


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
