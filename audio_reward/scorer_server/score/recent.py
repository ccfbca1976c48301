"""Recent answers by request id, so a retried request is scored once.

A client that lost its connection after the server scored a request sends
the same request again with the same ``request_id``.  Within ``ttl_s`` the
server answers the retry from here (or joins the scoring still in flight)
instead of transcribing again.  The key also holds a fingerprint of the
request's content, so two different requests that happen to share an id are
both scored: an id reused by mistake can never return another item's score.
Only successes are kept; a failed request runs again when retried.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

Key = tuple[str, bytes]


def request_key(request_id: str, *parts: object, waveform: np.ndarray) -> Key:
    """``request_id`` with a digest of everything that decides the answer."""
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        digest.update(repr(part).encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    digest.update(memoryview(np.ascontiguousarray(waveform)).cast("B"))
    return request_id, digest.digest()


@dataclass
class _Entry:
    future: asyncio.Future[dict[str, Any]]
    created: float


class RecentResults:
    """A bounded, time-limited map from request key to its answer (or the scoring in flight)."""

    def __init__(self, max_entries: int, ttl_s: float) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def claim(self, key: Key) -> tuple[asyncio.Future[dict[str, Any]], bool]:
        """The future holding ``key``'s answer, and whether the caller must produce it."""
        now = time.monotonic()
        entry = self._entries.get(key)
        if entry is not None and now - entry.created <= self.ttl_s:
            self._entries.move_to_end(key)
            return entry.future, False
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._entries[key] = _Entry(future, now)
        self._entries.move_to_end(key)
        self._evict(now)
        return future, True

    def resolve(self, future: asyncio.Future[dict[str, Any]], result: dict[str, Any]) -> None:
        if not future.done():
            future.set_result(result)

    def fail(self, key: Key, future: asyncio.Future[dict[str, Any]], error: BaseException) -> None:
        """Forget ``key`` so a retry scores again; requests already waiting on it get ``error``."""
        entry = self._entries.get(key)
        if entry is not None and entry.future is future:
            del self._entries[key]
        if not future.done():
            future.set_exception(error)
            future.exception()  # retrieved: no "never retrieved" warning when nobody was waiting

    def _evict(self, now: float) -> None:
        """Drop expired answers, then the least recently used ones beyond ``max_entries``.

        A scoring still in flight stays (until it expires) so later copies can join it;
        requests already waiting on a dropped entry keep their future either way.
        """
        excess = len(self._entries) - self.max_entries
        for key in list(self._entries):
            entry = self._entries[key]
            if now - entry.created > self.ttl_s or (excess > 0 and entry.future.done()):
                del self._entries[key]
                excess -= 1
            elif excess <= 0:
                break
