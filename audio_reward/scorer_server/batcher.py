"""Dynamic micro-batching in front of an ASR engine.

Requests put utterances on a bounded queue and await a future.  One worker
task takes what is queued (waiting up to ``max_wait_s`` for a batch to fill),
sorts it by duration so utterances of similar length share an engine call,
and resolves every future with its own transcript or with the exception of
the engine call it was part of: a failing batch fails only its own requests.
While the engine runs, new requests queue up, so under load batches fill
without any waiting.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from .engines.base import ASREngine, Transcription, TranscriptionInput

log = logging.getLogger(__name__)


class BatcherError(Exception):
    """Base of the batcher's refusals."""


class QueueFullError(BatcherError):
    """The queue holds ``max_queue`` utterances; retry after ``retry_after_s``."""

    def __init__(self, queued: int, limit: int, retry_after_s: float) -> None:
        super().__init__(f"the scoring queue is full ({queued} of {limit} utterances waiting)")
        self.retry_after_s = retry_after_s


class BatcherClosedError(BatcherError):
    """The server is shutting down and takes no new work."""


@dataclass
class BatchStats:
    """What the worker reports after each engine call (for metrics)."""

    size: int
    audio_seconds: float
    engine_seconds: float
    failed: bool


@dataclass
class _Pending:
    item: TranscriptionInput
    future: asyncio.Future[Transcription]
    enqueued_at: float = field(default_factory=time.monotonic)


class MicroBatcher:
    """Collects utterances into engine batches; see the module docstring."""

    def __init__(
        self,
        engine: ASREngine,
        *,
        max_batch_size: int = 16,
        max_wait_s: float = 0.01,
        max_queue: int = 512,
        on_batch: Callable[[BatchStats], None] | None = None,
    ) -> None:
        self.engine = engine
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self._on_batch = on_batch
        self._queue: list[_Pending] = []
        self._wakeup = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False
        self._busy = False
        self._recent_batch_s = 1.0  # running estimate of one engine call, for Retry-After

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def idle(self) -> bool:
        return not self._queue and not self._busy

    def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._run(), name="asr-batcher")

    def retry_after_s(self) -> float:
        """Seconds until the queue has likely drained by one batch (at least 1)."""
        batches_ahead = max(1, -(-len(self._queue) // self.max_batch_size))
        return max(1.0, batches_ahead * self._recent_batch_s)

    def submit_many(self, items: Sequence[TranscriptionInput]) -> list[asyncio.Future[Transcription]]:
        """Queue ``items`` together (all or none) and return one future per item.

        A request larger than ``max_queue`` is admitted only into an empty queue,
        so a big batch request is slow rather than impossible.
        """
        if self._closed:
            raise BatcherClosedError("the server is shutting down")
        queued = len(self._queue)
        if queued and queued + len(items) > self.max_queue:
            raise QueueFullError(queued, self.max_queue, self.retry_after_s())
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Transcription]] = []
        for item in items:
            fut: asyncio.Future[Transcription] = loop.create_future()
            self._queue.append(_Pending(item, fut))
            futures.append(fut)
        self._wakeup.set()
        return futures

    async def transcribe(self, item: TranscriptionInput) -> Transcription:
        """Queue one utterance and wait for its transcript."""
        return await self.submit_many([item])[0]

    async def _take_batch(self) -> list[_Pending]:
        while not self._queue:
            self._wakeup.clear()
            await self._wakeup.wait()
        deadline = time.monotonic() + self.max_wait_s
        while len(self._queue) < self.max_batch_size and not self._closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except asyncio.TimeoutError:
                break
        # Requests whose caller gave up (timeout, disconnect) are dropped, not transcribed.
        self._queue = [p for p in self._queue if not p.future.done()]
        # Take the oldest items, then order them by length so each engine call pads little.
        taken, self._queue = self._queue[: self.max_batch_size], self._queue[self.max_batch_size :]
        taken.sort(key=lambda p: p.item.audio.shape[0])
        return taken

    async def _run(self) -> None:
        while True:
            batch = await self._take_batch()
            if not batch:
                continue
            self._busy = True
            try:
                await self._run_batch(batch)
            finally:
                self._busy = False

    async def _run_batch(self, batch: list[_Pending]) -> None:
        started = time.monotonic()
        failed = False
        try:
            results = await self.engine.transcribe([p.item for p in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"engine returned {len(results)} transcripts for {len(batch)} utterances")
        except asyncio.CancelledError:
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(BatcherClosedError("the server stopped before this utterance was scored"))
            raise
        except Exception as exc:  # noqa: BLE001 - any engine failure belongs to this batch's requests only
            failed = True
            log.error("engine call failed", exc_info=True, extra={"batch_size": len(batch)})
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(exc)
        else:
            for p, result in zip(batch, results):
                if not p.future.done():
                    p.future.set_result(result)
        elapsed = time.monotonic() - started
        self._recent_batch_s = 0.8 * self._recent_batch_s + 0.2 * elapsed
        if self._on_batch is not None:
            audio_s = sum(p.item.duration_s for p in batch)
            self._on_batch(BatchStats(len(batch), audio_s, elapsed, failed))

    async def close(self, timeout_s: float = 30.0) -> None:
        """Stop taking work, finish what is queued (up to ``timeout_s``), then stop the worker."""
        self._closed = True
        self._wakeup.set()
        deadline = time.monotonic() + timeout_s
        while not self.idle and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
        for p in self._queue:
            if not p.future.done():
                p.future.set_exception(BatcherClosedError("the server stopped before this utterance was scored"))
        self._queue.clear()
