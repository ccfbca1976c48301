"""Scheduling utterances onto a model: micro-batches, or straight through.

Both schedulers derive from :class:`BaseScheduler`, which owns what they share: admission (a bounded queue,
all of a request or none, :class:`SchedulerFullError` beyond ``max_queue``; :func:`admit` turns a refusal into
the server's 429 with ``Retry-After``, or its 503 when closed), the batch call (:data:`BatchCall`: the ASR
engine's ``transcribe``, or a signal model's embedding or scoring) and the settling of each caller's future
with its own outcome, the accounting reported to metrics (:class:`BatchStats`), and closing. They differ only
in how they pick work; :func:`scheduler_for` picks the one an ASR engine needs.  The base also measures the
engine's throughput (:meth:`MicroBatchScheduler.admission`, audio seconds per wall second) for the engine client's
early refusal, and takes back the work of a caller that stopped waiting (:meth:`BaseScheduler.withdraw`).

:class:`MicroBatchScheduler`, for engines that take one batch at a time
(faster-whisper, transformers).  Requests put utterances on the queue
and await a future.  One worker task forms batches and hands them to the
engine, up to ``max_batches_in_flight`` at once: with two, the next batch's
features are computed on the CPU while the current one runs on the device.

* A batch is bounded by ``max_batch_size`` utterances and, when set,
  ``max_batch_audio_s`` seconds of audio (at least one utterance always goes).
* It always takes the oldest waiting utterance, so nothing waits longer than
  the batches ahead of it; the rest are the utterances closest in length to
  that one from the whole queue (length bucketing: each call pads little).
* While a batch is in flight the next one keeps filling until it is full or
  the engine frees up.  With the engine idle, the scheduler waits up to
  ``max_wait_s`` only while requests are still arriving (being read and
  decoded, see :meth:`BaseScheduler.arriving`); a lone request goes at once.
* Every future is resolved with its own transcript, or with the exception of
  the engine call it was part of: a failing batch fails only its own requests.

:class:`PassThroughScheduler`, for engines that batch continuously by
themselves (vLLM).  Each utterance goes to the engine on arrival, alone, up
to ``max_in_flight`` at once (vLLM's ``max_num_seqs``): a counting bound
like a semaphore, the rest wait in arrival order.  Each request finishes when
its own transcript is ready, never behind a slower batch-mate.  A request
whose caller gave up (timeout, disconnect) is dropped from the queue, or
cancelled inside the engine (vLLM aborts it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from audio_reward.futures import fail_all, settle

from ..config import ServerConfig
from ..engines.base import ASREngine, AudioInput
from ..errors import QueueFullError, ShuttingDownError

log = logging.getLogger(__name__)


MEASURED_CALLS = 3
"""Engine calls measured before the scheduler estimates its throughput (the first ones may be unrepresentative)."""
THROUGHPUT_WEIGHT = 0.2
"""Weight of the newest engine call in the running averages behind the throughput."""


class SchedulerFullError(Exception):
    """The queue holds ``max_queue`` utterances; retry after ``retry_after_s``."""

    def __init__(self, queued: int, limit: int, retry_after_s: float) -> None:
        super().__init__(f"the scoring queue is full ({queued} of {limit} utterances waiting)")
        self.retry_after_s = retry_after_s


@dataclass
class BatchStats:
    """What the scheduler reports after each engine call (for metrics)."""

    size: int
    audio_seconds: float
    engine_seconds: float
    failed: bool


@dataclass(frozen=True)
class Admission:
    """What the engine has ahead of a new request, and how fast it clears it, as last measured."""

    queued_audio_s: float
    """Audio seconds waiting in the queue."""
    running_audio_s: float
    """Audio seconds inside engine calls now (counted whole: how far along they are is not known)."""
    throughput: float
    """Audio seconds the engine transcribes per wall second, over its recent calls."""

    def wait_s(self, own_audio_s: float = 0.0) -> float:
        """Seconds until the work ahead, and then ``own_audio_s`` more, is transcribed at this throughput."""
        return (self.queued_audio_s + self.running_audio_s + own_audio_s) / self.throughput


@dataclass(frozen=True)
class Throughput:
    """What the engine has transcribed while it was busy (some engine call in flight), since the server started."""

    audio_s: float
    """Audio seconds of the engine calls that finished."""
    busy_s: float
    """Wall seconds during which at least one engine call was in flight (idle time left out)."""
    utterances: int
    """Utterances those calls transcribed."""

    @property
    def audio_s_per_s(self) -> float | None:
        """Audio seconds transcribed per busy wall second: the rate at the load the engine has seen; None before
        any call finished."""
        return self.audio_s / self.busy_s if self.audio_s > 0 and self.busy_s > 0 else None


@dataclass
class RefusalTurns:
    """When each request refused at admission is told to come back.

    Its turn is when the work ahead will have shrunk enough for it to fit, and no sooner than the turns of
    the requests refused before it have passed, each lasting its audio's engine time; so clients refused
    together come back in waves the engine can take.  A turn is never more than one request timeout past
    its fit (a client that never comes back, or one refused twice, holds a turn it does not use), and an
    idle engine forgets the turns given out.
    """

    until: float = 0.0
    """When the turns given out so far end (the event loop's clock)."""

    def next(self, fits_at: float, engine_s: float, limit_s: float) -> float:
        """The turn of a request that fits from ``fits_at`` and takes ``engine_s`` of engine time."""
        turn = min(max(fits_at, self.until), fits_at + limit_s)
        self.until = max(self.until, turn + engine_s)
        return turn

    def forget(self) -> None:
        """The engine is idle: the turns given out are over."""
        self.until = 0.0


@dataclass
class _Pending:
    item: AudioInput
    future: asyncio.Future[Any]


def _stopped_error() -> ShuttingDownError:
    return ShuttingDownError("the server stopped before this utterance was scored", retry_after_s=5)


def _cancel_if_abandoned(task: asyncio.Task[None], future: asyncio.Future[Any]) -> None:
    if future.cancelled():
        task.cancel()


BatchCall = Callable[[list[Any]], Awaitable[Sequence[Any]]]
"""What a scheduler calls: one awaited call per batch of queued :class:`AudioInput` items, one result per item,
in order.  An ASR engine's ``transcribe``; a signal model's embedding or scoring of the items' audio."""


class BaseScheduler(ABC):
    """Admission, the engine call, settling futures, accounting and closing; subclasses pick the work."""

    latency_weight: ClassVar[float]
    """Weight of the newest engine call in the running latency estimate behind ``Retry-After``."""

    def __init__(self, run_batch: BatchCall, *, max_queue: int,
                 on_batch: Callable[[BatchStats], None] | None = None) -> None:
        self.run_batch = run_batch
        self.max_queue = max_queue
        self._on_batch = on_batch
        self._waiting: list[_Pending] = []
        self._running: set[asyncio.Task[None]] = set()
        self._arriving = 0
        self._drained = asyncio.Event()  # set whenever work leaves the scheduler: close() waits on it
        self._closed = False
        self._recent_call_s = 1.0  # running estimate of one engine call, for Retry-After
        # Running averages of one call's audio and wall seconds: their ratio is the measured throughput
        # (weighted by call size, so one large batch counts for what it did), behind the admission estimate.
        self._call_audio_s = 0.0
        self._call_engine_s = 0.0
        self._calls_measured = 0
        self._running_audio_s = 0.0
        # Busy time and the audio done in it: the throughput /v1/info reports (any scheduler; the running
        # averages above describe one micro-batch call, which says nothing of an engine running many at once).
        self._busy_since: float | None = None
        self._busy_s = 0.0
        self._audio_done_s = 0.0
        self._utterances_done = 0

    @property
    def queued(self) -> int:
        """Utterances admitted and not yet handed to the engine."""
        return len(self._waiting)

    @property
    def in_flight(self) -> int:
        """Engine calls taken and not yet finished."""
        return len(self._running)

    @property
    def idle(self) -> bool:
        return not self._waiting and not self._running

    def start(self) -> None:  # noqa: B027 - a hook: most schedulers hand work over as it arrives
        """Start whatever hands work over (nothing by default: work moves as it arrives)."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """How this scheduler picks work, for ``/v1/info``."""

    @abstractmethod
    def retry_after_s(self) -> float:
        """Seconds a refused client should wait (at least 1)."""

    @abstractmethod
    def _admitted(self) -> None:
        """New work is queued: hand it over, or wake whatever does."""

    @contextlib.contextmanager
    def arriving(self) -> Iterator[None]:
        """Marks a request being read and decoded (a scheduler that batches may wait for it)."""
        self._arriving += 1
        try:
            yield
        finally:
            self._arriving -= 1
            self._admitted()

    def submit_many(self, items: Sequence[AudioInput]) -> list[asyncio.Future[Any]]:
        """Queue ``items`` together (all or none) and return one future per item.

        A request larger than ``max_queue`` is admitted only into an empty queue,
        so a big batch request is slow rather than impossible.
        """
        if self._closed:
            raise ShuttingDownError("the server is shutting down", retry_after_s=5)
        queued = len(self._waiting)
        if queued and queued + len(items) > self.max_queue:
            raise SchedulerFullError(queued, self.max_queue, self.retry_after_s())
        pending = [_Pending(item, asyncio.get_running_loop().create_future()) for item in items]
        self._waiting += pending
        self._admitted()
        return [p.future for p in pending]

    def withdraw(self, futures: Sequence[asyncio.Future[Any]]) -> None:
        """The caller stopped waiting for ``futures`` (its timeout): those still queued leave, cancelled.

        Work already handed to the engine runs on and settles its future: a batch engine cannot take one
        utterance out of a call, and its transcript costs nothing more, so the caller may keep it (the
        engine client puts it in the recent-results cache for the retry).  :class:`PassThroughScheduler`
        cancels that work too, since a continuous-batching engine frees the slot at once.
        """
        gone = {id(f) for f in futures}
        for p in self._waiting:
            if id(p.future) in gone:
                p.future.cancel()
        self._drop_abandoned()

    def _drop_abandoned(self) -> None:
        # Requests whose caller gave up (timeout, disconnect) leave the queue, untranscribed.
        if any(p.future.done() for p in self._waiting):
            self._waiting = [p for p in self._waiting if not p.future.done()]
            self._drained.set()

    def admission(self) -> Admission | None:
        """The work ahead and the measured throughput, where one rate describes the engine
        (:meth:`MicroBatchScheduler.admission`); None for :class:`PassThroughScheduler`: a continuous-batching
        engine's throughput changes with how much it holds, so one measured rate would misjudge the queue, and
        ``max_queue`` alone bounds admission there."""
        return None

    def throughput(self) -> Throughput:
        """The engine's audio seconds per busy second so far (the current busy stretch counted up to now)."""
        busy_s = self._busy_s
        if self._busy_since is not None:
            busy_s += time.monotonic() - self._busy_since
        return Throughput(self._audio_done_s, busy_s, self._utterances_done)

    def _launch(self, work: list[_Pending]) -> asyncio.Task[None]:
        """Run ``work`` as one engine call in a task of its own."""
        task = asyncio.get_running_loop().create_task(self._call(work), name="asr-call")
        if not self._running:
            self._busy_since = time.monotonic()
        self._running.add(task)
        task.add_done_callback(self._call_done)
        return task

    def _call_done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not self._running and self._busy_since is not None:
            self._busy_s += time.monotonic() - self._busy_since
            self._busy_since = None
        self._drained.set()
        self._admitted()

    async def _call(self, work: list[_Pending]) -> None:
        started = time.monotonic()
        failed = False
        futures = [p.future for p in work]
        audio_s = sum(p.item.duration_s for p in work)
        self._running_audio_s += audio_s
        try:
            results = await self.run_batch([p.item for p in work])
            if len(results) != len(work):
                raise RuntimeError(f"engine returned {len(results)} transcripts for {len(work)} utterances")
        except asyncio.CancelledError:
            fail_all(futures, _stopped_error())
            raise
        except Exception as exc:  # any engine failure belongs to this call's requests only
            failed = True
            log.exception("engine call failed", extra={"batch_size": len(work)})
            fail_all(futures, exc)
        else:
            settle(futures, results)
        finally:
            self._running_audio_s -= audio_s
        elapsed = time.monotonic() - started
        self._recent_call_s += self.latency_weight * (elapsed - self._recent_call_s)
        if not failed:
            w = THROUGHPUT_WEIGHT if self._calls_measured else 1.0  # the first call sets the averages (from 0.0)
            self._call_audio_s += w * (audio_s - self._call_audio_s)
            self._call_engine_s += w * (elapsed - self._call_engine_s)
            self._calls_measured += 1
            self._audio_done_s += audio_s
            self._utterances_done += len(work)
        if self._on_batch is not None:
            self._on_batch(BatchStats(len(work), audio_s, elapsed, failed))

    def _extra_tasks(self) -> list[asyncio.Task[None]]:
        """Tasks besides the engine calls that closing must stop."""
        return []

    async def close(self, timeout_s: float = 30.0) -> None:
        """Stop taking work, let what is queued and running finish (up to ``timeout_s``), then cancel the rest."""
        self._closed = True
        self._admitted()
        deadline = time.monotonic() + timeout_s
        while not self.idle and (remaining := deadline - time.monotonic()) > 0:
            self._drained.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._drained.wait(), remaining)
        # The queue goes first, so a call cancelled below hands nothing new to the engine.
        waiting, self._waiting = self._waiting, []
        fail_all([p.future for p in waiting], _stopped_error())
        tasks = [*self._extra_tasks(), *self._running]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class MicroBatchScheduler(BaseScheduler):
    """Collects utterances into engine batches; see the module docstring."""

    latency_weight = 0.2

    def __init__(self, run_batch: BatchCall, *, max_batch_size: int = 16, max_wait_s: float = 0.01,
                 max_queue: int = 512, max_batch_audio_s: float | None = None, max_batches_in_flight: int = 1,
                 on_batch: Callable[[BatchStats], None] | None = None) -> None:
        super().__init__(run_batch, max_queue=max_queue, on_batch=on_batch)
        if max_batches_in_flight < 1:
            raise ValueError("max_batches_in_flight must be at least 1")
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.max_batch_audio_s = max_batch_audio_s
        self.max_batches_in_flight = max_batches_in_flight
        self._wakeup = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._run(), name="asr-micro-batches")

    def describe(self) -> dict[str, Any]:
        return {"scheduler": "micro-batches", "max_batch_size": self.max_batch_size,
                "max_wait_ms": self.max_wait_s * 1000, "max_batch_audio_s": self.max_batch_audio_s,
                "max_batches_in_flight": self.max_batches_in_flight}

    def retry_after_s(self) -> float:
        """Seconds until the queue has likely drained by one batch (at least 1)."""
        batches_ahead = max(1, -(-len(self._waiting) // self.max_batch_size))
        return max(1.0, batches_ahead * self._recent_call_s)

    def _admitted(self) -> None:
        self._wakeup.set()

    def admission(self) -> Admission | None:
        """The work ahead and the measured throughput; None until enough engine calls have been measured."""
        if self._calls_measured < MEASURED_CALLS or self._call_engine_s <= 0 or self._call_audio_s <= 0:
            return None
        # The engine calls in flight at once add up their throughputs.
        rate = self._call_audio_s / self._call_engine_s * self.max_batches_in_flight
        return Admission(sum(p.item.duration_s for p in self._waiting), self._running_audio_s, rate)

    def _extra_tasks(self) -> list[asyncio.Task[None]]:
        worker, self._worker = self._worker, None
        return [worker] if worker is not None else []

    # -- forming batches ------------------------------------------------------------------
    async def _wait(self, timeout_s: float | None = None) -> None:
        self._wakeup.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout_s)

    def _batch_full(self) -> bool:
        budget = self.max_batch_audio_s
        return len(self._waiting) >= self.max_batch_size or (
            budget is not None and sum(p.item.duration_s for p in self._waiting) >= budget)

    async def _take_batch(self) -> list[_Pending]:
        self._drop_abandoned()
        while not self._waiting:
            await self._wait()
            self._drop_abandoned()
        deadline = time.monotonic() + self.max_wait_s
        while not self._closed and not self._batch_full():
            if self._running:
                await self._wait()  # the engine is busy: a fuller batch costs no latency
            elif self._arriving and (remaining := deadline - time.monotonic()) > 0:
                await self._wait(remaining)
            else:
                break
            self._drop_abandoned()
        return self._select()

    def _select(self) -> list[_Pending]:
        """The oldest utterance and those closest to it in length, within the count and audio budget."""
        queue = self._waiting
        if not queue:
            return []
        budget = self.max_batch_audio_s
        chosen = {0}
        audio_s = queue[0].item.duration_s
        length = queue[0].item.audio.shape[0]
        for i in sorted(range(1, len(queue)), key=lambda i: (abs(queue[i].item.audio.shape[0] - length), i)):
            if len(chosen) >= self.max_batch_size:
                break
            seconds = queue[i].item.duration_s
            if budget is not None and audio_s + seconds > budget:
                continue
            chosen.add(i)
            audio_s += seconds
        taken = [queue[i] for i in sorted(chosen)]
        self._waiting = [p for i, p in enumerate(queue) if i not in chosen]
        taken.sort(key=lambda p: p.item.audio.shape[0])  # order by length so each engine call pads little
        return taken

    async def _run(self) -> None:
        while True:
            while len(self._running) >= self.max_batches_in_flight:
                await self._wait()
            if batch := await self._take_batch():
                self._launch(batch)


class PassThroughScheduler(BaseScheduler):
    """Hands each utterance straight to an engine that batches by itself; see the module docstring."""

    latency_weight = 0.05

    def __init__(self, run_batch: BatchCall, *, max_in_flight: int, max_queue: int = 512,
                 on_batch: Callable[[BatchStats], None] | None = None) -> None:
        super().__init__(run_batch, max_queue=max_queue, on_batch=on_batch)
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.max_in_flight = max_in_flight

    def describe(self) -> dict[str, Any]:
        # Each utterance goes alone and at once: the engine forms its own batches.
        return {"scheduler": "engine", "max_batch_size": 1, "max_wait_ms": 0.0, "max_in_flight": self.max_in_flight}

    def retry_after_s(self) -> float:
        """Seconds until the waiting utterances have likely entered the engine (at least 1)."""
        rate = self.max_in_flight / max(self._recent_call_s, 1e-3)
        return max(1.0, len(self._waiting) / rate)

    def withdraw(self, futures: Sequence[asyncio.Future[Any]]) -> None:
        """Cancel ``futures``, queued or inside the engine (which aborts them, freeing their slots at once)."""
        for future in futures:
            future.cancel()
        self._drop_abandoned()
        self._admitted()

    def _admitted(self) -> None:
        # Start as many as the engine has room for, oldest first (a closing scheduler still drains its queue).
        while self._waiting and len(self._running) < self.max_in_flight:
            pending = self._waiting.pop(0)
            if pending.future.done():
                self._drained.set()
                continue  # the caller gave up while it waited
            task = self._launch([pending])
            # A caller that gives up cancels its utterance inside the engine too.
            pending.future.add_done_callback(functools.partial(_cancel_if_abandoned, task))


def scheduler_for(engine: ASREngine, config: ServerConfig,
                  on_batch: Callable[[BatchStats], None] | None = None) -> PassThroughScheduler | MicroBatchScheduler:
    """The scheduler a loaded ``engine`` needs, configured by the settings' batching and queue fields.

    A self-scheduling engine gets every utterance straight away, bounded by
    its ``max_concurrency`` (``max_batch_size`` when it names none).  Other
    engines get micro-batches: one utterance per call when the engine gains
    nothing from batches; ``max_batches_in_flight`` None means 2 on a GPU
    (features of the next batch overlap the device) and 1 on the CPU (where
    the model already uses every core).
    """
    c = config
    if engine.schedules_itself:
        return PassThroughScheduler(engine.transcribe, max_in_flight=engine.max_concurrency or c.max_batch_size,
                                    max_queue=c.max_queue, on_batch=on_batch)
    batches = engine.prefers_batches
    in_flight = c.max_batches_in_flight if c.max_batches_in_flight is not None else (2 if engine.on_accelerator else 1)
    return MicroBatchScheduler(engine.transcribe, max_batch_size=c.max_batch_size if batches else 1,
                               max_wait_s=c.max_wait_ms / 1000.0 if batches else 0.0, max_queue=c.max_queue,
                               max_batch_audio_s=c.max_batch_audio_s if batches else None,
                               max_batches_in_flight=in_flight, on_batch=on_batch)


def admit(scheduler: BaseScheduler, inputs: Sequence[AudioInput], *,
          queue: str | None = None) -> list[asyncio.Future[Any]]:
    """Queue ``inputs`` together (all or none); 429 when the queue is full, 503 when it is closed.

    ``queue`` names the queue in the 429's message (the signal models' queues); else the scheduler's own words.
    """
    try:
        return list(scheduler.submit_many(inputs))
    except SchedulerFullError as exc:
        raise QueueFullError(f"{queue}'s queue is full" if queue else str(exc),
                             retry_after_s=exc.retry_after_s) from None
