"""Recent transcripts by request id, so a retried request is transcribed once.

A client that lost its connection after the server scored a request sends
the same request again with the same ``request_id``.  Within ``ttl_s`` the
server answers the retry from the transcript kept here (or joins the
transcription still in flight) instead of transcribing again; scoring the
transcript against the retry's own prompt gives the same answer, so no
prompt-sized field is ever stored.  The key also holds a fingerprint of the
request's content, so two different requests that happen to share an id are
both scored: an id reused by mistake can never return another item's score.
Only successes are kept; a failed request runs again when retried.  The map
is bounded by entries and by bytes.
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


# What one entry costs beyond its value: key tuple, id and digest, future, entry, map slot.
ENTRY_OVERHEAD_BYTES = 512


@dataclass
class _Entry:
    future: asyncio.Future[Any]
    created: float
    size: int = ENTRY_OVERHEAD_BYTES


class RecentResults:
    """A bounded, time-limited map from request key to its value (or the work still in flight)."""

    def __init__(self, max_entries: int, ttl_s: float, max_bytes: int | None = None) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def claim(self, key: Key) -> tuple[asyncio.Future[Any], bool]:
        """The future holding ``key``'s value, and whether the caller must produce it."""
        now = time.monotonic()
        entry = self._entries.get(key)
        if entry is not None and now - entry.created <= self.ttl_s:
            self._entries.move_to_end(key)
            return entry.future, False
        if entry is not None:
            self._drop(key)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._entries[key] = _Entry(future, now)
        self.bytes += ENTRY_OVERHEAD_BYTES
        self._evict(now)
        return future, True

    def resolve(self, key: Key, future: asyncio.Future[Any], value: Any, size: int = 0) -> None:
        """Give ``key``'s waiters ``value`` and keep it, counted as ``size`` bytes plus the entry's overhead."""
        if not future.done():
            future.set_result(value)
        entry = self._entries.get(key)
        if entry is not None and entry.future is future:
            self.bytes += size
            entry.size += size
            self._evict(time.monotonic())

    def fail(self, key: Key, future: asyncio.Future[Any], error: BaseException) -> None:
        """Forget ``key`` so a retry runs again; requests already waiting on it get ``error``."""
        entry = self._entries.get(key)
        if entry is not None and entry.future is future:
            self._drop(key)
        if not future.done():
            future.set_exception(error)
            future.exception()  # retrieved: no "never retrieved" warning when nobody was waiting

    def _drop(self, key: Key) -> None:
        self.bytes -= self._entries.pop(key).size

    def _evict(self, now: float) -> None:
        """Drop expired values, then the least recently used ones beyond ``max_entries`` or ``max_bytes``.

        Work still in flight stays (until it expires) so later copies can join it;
        requests already waiting on a dropped entry keep their future either way.
        Runs twice per request: it stops at the first entry it keeps, without copying the map.
        """
        drop = []
        count, size = len(self._entries), self.bytes
        for key, entry in self._entries.items():
            over = count > self.max_entries or (self.max_bytes is not None and size > self.max_bytes)
            if now - entry.created > self.ttl_s or (over and entry.future.done()):
                drop.append(key)
                count -= 1
                size -= entry.size
            elif not over:
                break
        for key in drop:
            self._drop(key)
