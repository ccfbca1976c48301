"""When to try again and how long to wait."""

from __future__ import annotations

import email.utils
import math
import random
import time

RETRYABLE_STATUSES = frozenset({408, 429})


def is_retryable_status(status: int, retryable_flag: bool | None = None) -> bool:
    """408, 429 and 5xx are transient; any other 4xx is final.

    A server may mark a 5xx final with ``"retryable": false`` in its error
    body (an input that crashes the engine every time); a 4xx is never retried.
    """
    if status in RETRYABLE_STATUSES:
        return True
    if 500 <= status <= 599:
        return retryable_flag is not False
    return False


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def backoff_delay(retry: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base·2^retry)].

    Full jitter spreads the retries of many clients hit by the same outage,
    so they do not return in lock-step.
    """
    ceiling = min(cap, base * (2.0 ** min(retry, 62)))
    return (rng or random).uniform(0.0, ceiling)


def next_delay(
    retry: int, *, base: float, cap: float, retry_after: float | None, retry_after_max: float,
    rng: random.Random | None = None,
) -> float:
    """The wait before retry number ``retry`` (0-based): backoff, but never less than a capped ``Retry-After``."""
    delay = backoff_delay(retry, base, cap, rng)
    if retry_after is not None:
        delay = max(delay, min(retry_after, retry_after_max))
    return delay
