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

A caller claims each key (:meth:`RecentResults.claim`): the first claim of a
key leads and settles it with :meth:`~RecentResults.resolve` or
:meth:`~RecentResults.fail`, later ones wait on the claim's future
(:class:`~.engine_client.EngineClient` does this for the server).
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
    digest.update(np.ascontiguousarray(waveform).data.cast("B"))
    return request_id, digest.digest()


# What one entry costs beyond its value: key tuple, id and digest, future, entry, map slot.
ENTRY_OVERHEAD_BYTES = 512


@dataclass
class _Entry:
    future: asyncio.Future[Any]
    created: float
    size: int = ENTRY_OVERHEAD_BYTES


@dataclass(frozen=True)
class Claim:
    """A request's hold on one key: the future holding its value, and whether this request must produce it."""

    key: Key
    future: asyncio.Future[Any]
    leader: bool
    """True: no request with this key is recent or in flight, so this one produces the value and settles it."""


class RecentResults:
    """A bounded, time-limited map from request key to its value (or the work still in flight)."""

    def __init__(self, max_entries: int, ttl_s: float, max_bytes: int | None = None) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()

    @property
    def enabled(self) -> bool:
        """False when ``max_entries`` is 0: nothing is kept, and requests need no key."""
        return self.max_entries > 0

    def __len__(self) -> int:
        return len(self._entries)

    def claim(self, key: Key) -> Claim:
        """A hold on ``key``: its recent or in-flight value, or the duty to produce it."""
        now = time.monotonic()
        entry = self._entries.get(key)
        if entry is not None and now - entry.created <= self.ttl_s:
            self._entries.move_to_end(key)
            return Claim(key, entry.future, leader=False)
        if entry is not None:
            self._drop(key)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._entries[key] = _Entry(future, now)
        self.bytes += ENTRY_OVERHEAD_BYTES
        self._evict(now)
        return Claim(key, future, leader=True)

    def resolve(self, claim: Claim, value: Any, size: int = 0) -> None:
        """Give the claim's waiters ``value`` and keep it, counted as ``size`` bytes plus the entry's overhead."""
        if not claim.future.done():
            claim.future.set_result(value)
        entry = self._entries.get(claim.key)
        if entry is not None and entry.future is claim.future:
            self.bytes += size
            entry.size += size
            self._evict(time.monotonic())

    def fail(self, claim: Claim, error: BaseException) -> None:
        """Forget the claim's key so a retry runs again; requests already waiting on it get ``error``."""
        entry = self._entries.get(claim.key)
        if entry is not None and entry.future is claim.future:
            self._drop(claim.key)
        if not claim.future.done():
            claim.future.set_exception(error)
            claim.future.exception()  # retrieved: no "never retrieved" warning when nobody was waiting

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
