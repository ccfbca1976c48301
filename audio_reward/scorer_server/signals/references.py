"""Registered speaker references: an embedding per id, bounded in count, bytes and age.

``POST /v1/speakers`` embeds a reference recording once and keeps the
embedding here under the sha256 of the decoded 16 kHz samples; a score
request then names the id instead of sending the recording again.  The store
evicts the least recently used entry past ``max_entries`` or ``max_bytes``,
and any entry unused for ``ttl_s``; a request naming an evicted id gets 404
``unknown_speaker_reference`` and the client registers the recording again.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def reference_id(audio_16k: np.ndarray) -> str:
    """The id of a reference: sha256 (hex) of its 16 kHz float32 little-endian samples."""
    return hashlib.sha256(np.ascontiguousarray(audio_16k, dtype="<f4").tobytes()).hexdigest()


@dataclass(frozen=True)
class _Entry:
    embedding: np.ndarray
    size: int
    used_at: float


def entry_bytes(key: str, embedding: np.ndarray) -> int:
    """What one entry costs: the embedding's buffer and array header, the id string and the entry itself."""
    return embedding.nbytes + sys.getsizeof(embedding) + sys.getsizeof(key) + 200


class SpeakerReferenceStore:
    """Embeddings by reference id, least recently used first out; thread-safe."""

    def __init__(self, *, max_entries: int, max_bytes: int, ttl_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self.bytes = 0  # what the kept entries cost together (entry_bytes)
        self._lock = threading.Lock()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> np.ndarray | None:
        """The embedding registered under ``key`` (and marks it used), or None if unknown or evicted."""
        with self._lock:
            self._expire()
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries[key] = _Entry(entry.embedding, entry.size, self._clock())
            self._entries.move_to_end(key)
            return entry.embedding

    def put(self, key: str, embedding: np.ndarray) -> None:
        """Keep ``embedding`` (read-only copy) under ``key``, evicting the oldest entries past the bounds."""
        kept = np.array(embedding, dtype=np.float32, copy=True)
        kept.setflags(write=False)
        size = entry_bytes(key, kept)
        with self._lock:
            if (old := self._entries.pop(key, None)) is not None:
                self.bytes -= old.size
            if size > self.max_bytes or self.max_entries == 0:
                return
            self._entries[key] = _Entry(kept, size, self._clock())
            self.bytes += size
            while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
                self._evict_oldest()
            self._expire()

    def _evict_oldest(self) -> None:
        _, entry = self._entries.popitem(last=False)
        self.bytes -= entry.size
        self.evictions += 1

    def _expire(self) -> None:
        deadline = self._clock() - self.ttl_s
        while self._entries and next(iter(self._entries.values())).used_at <= deadline:  # the oldest has expired
            self._evict_oldest()
