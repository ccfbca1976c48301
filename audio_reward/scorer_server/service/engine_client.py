"""The one way into the ASR engine for every service: its state, its scheduler and what a call to it may answer.

As vLLM's serving classes are each built over one ``EngineClient``, the scoring pipeline
(:mod:`.pipeline`), the transcription API (:mod:`.transcription`) and ``/v1/info`` (:mod:`.info`) are built
over one :class:`EngineClient` and never reach past it.  It owns:

- readiness: loading and warming the engine, starting its scheduler, and why it is not ready;
- the scheduler (:mod:`.scheduler`) and its settings;
- the request timeout, per utterance: what finished in time is answered, the rest gets its own 504;
- language resolution: the request's language, else the server default, refused with a 400 before anything
  is queued when the model does not transcribe it;
- single-flight dedup (:mod:`.dedup`): a retried request, keyed here, joins its first copy instead of running again;
- early refusal: 429 at admission for a request the measured throughput cannot finish within the timeout;
- the mapping of scheduler outcomes onto the error tree: queue full → 429, closed → 503, timeout → 504,
  engine failure → 500, not ready → 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np

from audio_reward.protocol.models import BatchingDescription, ThroughputDescription
from audio_reward.scoring import language_code

from ..config import ServerConfig
from ..engines.base import ASREngine, EngineInfo, Transcription, TranscriptionInput
from ..errors import (
    BadRequestError,
    EngineError,
    NotReadyError,
    OverloadedError,
    RequestTimeoutError,
    ServerError,
    ShuttingDownError,
)
from .dedup import Claim, Key, RecentResults, request_key
from .prometheus import AdmissionCollector, EngineSchedulerCollector, ServerMetrics
from .scheduler import (
    BaseScheduler,
    RefusalTurns,
    Throughput,
    admit,
    scheduler_for,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

ADMISSION_HEADROOM = 0.8
"""Share of the request timeout an admitted request's estimated wait may fill: the throughput is an average
over recent calls, and the rest absorbs a slower stretch (other load on the machine, a longer clip)."""


@dataclass(frozen=True)
class EngineRequest:
    """One utterance to transcribe: 16 kHz audio, its language, its request id and its dedup key."""

    audio: np.ndarray
    language: str | None
    request_id: str
    key: Key | None = None
    """Set when the client named the request: another request with the same key is answered by this one."""


@dataclass(frozen=True)
class EngineOutcome:
    """One utterance's transcript or error, and whether it was joined from an earlier request with its key."""

    value: Transcription | ServerError
    joined: bool = False


@dataclass
class EngineState:
    """Whether the engine is ready, and why not: what ``/readyz``, ``/v1/info`` and the CLI report."""

    ready: bool = False
    load_error: str | None = None
    """The exception type that stopped the models loading (the message stays in the log)."""
    batching_note: str | None = None
    """Why the scheduler's batch size differs from ``max_batch_size``, when it does."""
    started_at: float = field(default_factory=time.time)


class UnsupportedDefaultLanguageError(ValueError):
    """The server's ``--language`` is one its loaded model does not transcribe: every request would be refused."""


class EngineClient:
    """The ASR engine as every service sees it; built once per app, started by the app's lifespan."""

    def __init__(self, engine: ASREngine, settings: ServerConfig, metrics: ServerMetrics) -> None:
        self._engine = engine
        self._settings = settings
        """Its batching, queue and dedup cache sizes, request timeout, early refusal and default language."""
        self._recent = RecentResults(settings.dedup_cache_size, settings.dedup_ttl_s, settings.dedup_cache_bytes)
        self._metrics = metrics
        self.request_timeout_s = settings.request_timeout_s
        self.state = EngineState()
        self._scheduler: BaseScheduler | None = None
        self._turns = RefusalTurns()

    # -- what it is ----------------------------------------------------------------------------------------------
    @property
    def info(self) -> EngineInfo:
        """The loaded engine's identity (its model id, weights digest, device)."""
        return self._engine.info

    @property
    def options(self) -> dict[str, Any]:
        """The engine's own options as it resolved them."""
        return dict(self._engine.options)

    @property
    def queued(self) -> int:
        """Utterances waiting for the engine (0 before it is ready)."""
        return self._scheduler.queued if self._scheduler is not None else 0

    def describe_batching(self) -> BatchingDescription:
        """The ``/v1/info`` batching part: how the engine takes work, and the scheduler's limits once started."""
        engine, s = self._engine, self._settings
        started = self._scheduler.describe() if self._scheduler is not None else {
            "max_batch_size": s.max_batch_size, "max_wait_ms": s.max_wait_ms}
        return BatchingDescription.model_validate({
            "engine_batches": engine.prefers_batches, "engine_schedules_itself": engine.schedules_itself,
            **started, "max_batch_size_setting": s.max_batch_size, "note": self.state.batching_note})

    def describe_throughput(self) -> ThroughputDescription:
        """The ``/v1/info`` throughput part: audio seconds per busy second over the requests served so far."""
        measured = self._scheduler.throughput() if self._scheduler is not None else Throughput(0.0, 0.0, 0)
        rate = measured.audio_s_per_s
        return ThroughputDescription(
            audio_seconds_per_second=None if rate is None else round(rate, 3),
            audio_seconds=round(measured.audio_s, 3), busy_seconds=round(measured.busy_s, 3),
            utterances=measured.utterances)

    # -- life cycle ----------------------------------------------------------------------------------------------
    def load(self) -> None:
        """Load and warm the engine (blocking; the lifespan runs it in a thread)."""
        self._engine.load()
        self._check_default_language()
        self._engine.warmup()

    def _check_default_language(self) -> None:
        """Fail the load when ``--language`` is one the model lacks: the server would refuse every request
        that names no language of its own, so it is a start-up error, not a per-request one."""
        language, supported = language_code(self._settings.language), self._engine.languages
        if language is None or supported is None or language in supported:
            return
        shown = ", ".join(sorted(supported)) if len(supported) <= 12 else f"{len(supported)} languages"
        raise UnsupportedDefaultLanguageError(
            f"--language {self._settings.language}: model {self.info.model_id} does not transcribe it "
            f"(it supports: {shown})")

    def start(self) -> None:
        """Start the scheduler the loaded engine needs, and take requests (on the running loop)."""
        engine, s = self._engine, self._settings
        if not engine.prefers_batches and not engine.schedules_itself and s.max_batch_size > 1:
            self.state.batching_note = (
                f"max_batch_size {s.max_batch_size} is not used: the {engine.info.engine} engine on "
                f"{engine.info.device} decodes one utterance per call (it does not batch, or its batched option "
                "is off), so the scheduler hands it one request at a time"
            )
        self._scheduler = scheduler_for(engine, s, on_batch=self._metrics.observe_batch)
        self._scheduler.start()
        if engine.scheduler_stats():  # exported on every scrape
            self._metrics.registry.register(EngineSchedulerCollector(engine.scheduler_stats))
        self._metrics.registry.register(AdmissionCollector(self.admission_estimate))
        self.state.ready = True
        self._metrics.ready.set(1)
        self._metrics.set_build(engine=engine.info.engine, model=engine.info.model_id)

    def stop_taking_requests(self) -> None:
        """Readiness off (``/readyz`` 503) while what is in flight finishes."""
        self.state.ready = False
        self._metrics.ready.set(0)

    async def close(self, timeout_s: float) -> None:
        """Drain the scheduler (at most ``timeout_s``), then release the engine."""
        self.stop_taking_requests()
        if self._scheduler is not None:
            await self._scheduler.close(timeout_s=timeout_s)
        await asyncio.to_thread(self._engine.close)

    # -- languages and requests ------------------------------------------------------------------------------------
    def language(self, requested: str | None, *, path: str = "$.language") -> str | None:
        """The language code an utterance decodes with: ``requested``, else the server default (None: detect).

        400 ``unsupported_language`` (at ``path``) when the model does not transcribe it.
        """
        return self._check_language(self._resolve(requested), requested, path)

    def request(self, audio: np.ndarray, requested_language: str | None, request_id: str, *,
                rules: Callable[[str | None], T], identity: tuple[object, ...] | None = None,
                ) -> tuple[EngineRequest, T]:
        """One 16 kHz utterance to transcribe, in the language :meth:`language` resolves, and ``rules(language)``.

        ``rules`` is the caller's own reading of that language (the scoring rules normalizing the prompt): it
        runs before the model's check, so its refusal, which names those rules, comes first.  ``identity``
        (what else decides the answer) is given when the client named ``request_id``: a retry with the same
        id and content is then answered once, when the server keeps recent results.
        """
        language = self._resolve(requested_language)
        ruled = rules(language)
        self._check_language(language, requested_language, "$.language")
        key = (request_key(request_id, language, *identity, waveform=audio)
               if identity is not None and self._recent.enabled else None)
        return EngineRequest(audio, language, request_id, key), ruled

    def _resolve(self, requested: str | None) -> str | None:
        return language_code(requested or self._settings.language)

    def _check_language(self, language: str | None, requested: str | None, path: str) -> str | None:
        """``language``, unless the model does not transcribe it: then a 400 naming ``requested`` as sent."""
        supported = self._engine.languages
        if language is not None and supported is not None and language not in supported:
            shown = ", ".join(sorted(supported)) if len(supported) <= 12 else f"{len(supported)} languages"
            raise BadRequestError(
                "unsupported_language",
                f"model {self.info.model_id} does not transcribe language {requested or language!r} "
                f"(it supports: {shown})",
                path=path,
            )
        return language

    # -- transcription -------------------------------------------------------------------------------------------
    def arriving(self) -> contextlib.AbstractContextManager[None]:
        """Tells the scheduler a request is being decoded, so an idle engine may wait for it to join a batch."""
        return self._scheduler.arriving() if self._scheduler is not None else contextlib.nullcontext()

    def _started(self) -> BaseScheduler:
        """The scheduler to submit to; 503 with ``Retry-After`` while loading or after a failed load."""
        if self._scheduler is None or not self.state.ready:
            if self.state.load_error:
                raise NotReadyError(f"the ASR model failed to load ({self.state.load_error}); see the server log",
                                    retry_after_s=30)
            raise NotReadyError("the ASR model is still loading", retry_after_s=5)
        return self._scheduler

    def _timeout(self) -> RequestTimeoutError:
        return RequestTimeoutError(f"scoring took longer than the server's limit of {self.request_timeout_s:g} s")

    def admission_estimate(self) -> dict[str, float]:
        """What ``/metrics`` shows of the admission rule: the queue in audio seconds, the measured throughput,
        and the wait a new request would see now (the last two absent until measured)."""
        admission = self._scheduler.admission() if self._scheduler is not None else None
        if admission is None:
            return {}
        return {"queued_audio_seconds": admission.queued_audio_s, "throughput": admission.throughput,
                "estimated_wait_seconds": admission.wait_s()}

    def _refuse_if_late(self, scheduler: BaseScheduler, inputs: Sequence[TranscriptionInput]) -> None:
        """429 now for a request that the measured throughput says cannot finish within the request timeout
        (within :data:`ADMISSION_HEADROOM` of it).

        Refusing at once tells the client when to come back instead of holding it until a 504 with nothing
        done: ``Retry-After`` is the request's turn (:class:`~.scheduler.RefusalTurns`), so a storm of refused
        clients comes back in waves the engine can take, not all at once to be refused again.  An idle engine
        takes anything: a request too large to finish in time alone is still transcribed as far as the timeout
        allows (its finished items are answered).
        """
        if not self._settings.early_refusal or not inputs:
            return
        if scheduler.idle:
            self._turns.forget()
            return
        admission = scheduler.admission()
        if admission is None:
            return
        own_s = sum(item.duration_s for item in inputs)
        wait_s = admission.wait_s(own_s)
        budget_s = ADMISSION_HEADROOM * self.request_timeout_s
        if wait_s <= budget_s:
            return
        now = asyncio.get_running_loop().time()
        turn = self._turns.next(now + wait_s - budget_s, own_s / admission.throughput, self.request_timeout_s)
        raise OverloadedError(
            f"the server would not finish this request within its limit of {self.request_timeout_s:g} s: "
            f"{admission.queued_audio_s + admission.running_audio_s:.1f} s of audio are ahead of it at "
            f"{admission.throughput:.2f} audio seconds per second (estimated wait {wait_s:.1f} s)",
            retry_after_s=turn - now)

    async def transcribe_many(self, requests: Sequence[EngineRequest]) -> list[EngineOutcome]:
        """Each request's outcome, in order, transcribing each key once across the requests in flight and recent.

        Requests without a key, and those whose key is new, go to the scheduler together (so a batch's
        utterances enter the queue together); the others join the request that holds their key.  All of them
        share one deadline, the request timeout: an utterance finished by then is answered, one that is not
        gets its own retryable 504 (:class:`RequestTimeoutError`), so a slow batch loses none of its finished
        work.  Each transcript goes into the recent-results cache the moment the engine returns it, whatever
        becomes of the request (a timeout, a disconnect); an utterance still inside the engine at the deadline
        runs on and lands there too, so a retry with the same ids transcribes only what never reached the
        engine.  A failure before anything is queued (not ready, queue full) is raised, and the keys it held
        are released with that error.
        """
        if not requests:
            return []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.request_timeout_s
        claims = [self._recent.claim(r.key) if r.key is not None else None for r in requests]
        leading = [i for i, claim in enumerate(claims) if claim is None or claim.leader]
        scheduler, futures = self._admit_leading([requests[i] for i in leading], [claims[i] for i in leading])
        leads = {i: _Lead(requests[i], claims[i], self._recent, future)
                 for i, future in zip(leading, futures, strict=True)}
        # Only keyed requests join another: the claim of one that does not lead is never None.
        waits = [leads[i].engine if i in leads else cast(Claim, claims[i]).future for i in range(len(requests))]
        try:
            await asyncio.wait(waits, timeout=max(0.0, deadline - loop.time()))
        finally:
            # Whatever has not finished by now is the caller's no longer: queued work leaves the queue.
            scheduler.withdraw([f for f in futures if not f.done()])
        return [self._outcome(leads.get(i), claims[i]) for i in range(len(requests))]

    def _outcome(self, lead: _Lead | None, claim: Claim | None) -> EngineOutcome:
        """What became of one utterance: its own engine call, or the one it joined."""
        if lead is not None:
            return EngineOutcome(lead.outcome(self._timeout))
        return EngineOutcome(_joined(cast(Claim, claim).future, self._timeout), joined=True)

    def _admit_leading(self, requests: Sequence[EngineRequest], claims: Sequence[Claim | None]
                       ) -> tuple[BaseScheduler, list[asyncio.Future[Transcription]]]:
        """Queue the utterances this request transcribes itself; on a refusal, release their keys with it."""
        try:
            scheduler = self._started()
            inputs = [TranscriptionInput(r.audio, r.language) for r in requests]
            self._refuse_if_late(scheduler, inputs)
            futures = admit(scheduler, inputs)
        except BaseException as exc:
            failure = exc if isinstance(exc, ServerError) else _stopped()
            for claim in claims:
                if claim is not None:
                    self._recent.fail(claim, failure)
            raise
        return scheduler, futures

    async def transcribe(self, audio: np.ndarray, language: str | None, request_id: str) -> Transcription:
        """One 16 kHz utterance, unscored (the transcription API); raises :class:`ServerError`."""
        (outcome,) = await self.transcribe_many([EngineRequest(audio, language, request_id)])
        if isinstance(outcome.value, ServerError):
            raise outcome.value
        return outcome.value


class _Lead:
    """One utterance this request sends to the engine: its engine future, and the key it settles in the cache.

    The cache is settled from the engine future's callback, not from the request's code, so a transcript is
    kept even when the request that asked for it has already timed out or gone.
    """

    def __init__(self, request: EngineRequest, claim: Claim | None, recent: RecentResults,
                 engine: asyncio.Future[Transcription]) -> None:
        self.request = request
        self.claim = claim
        self._recent = recent
        self.engine = engine
        self.value: Transcription | ServerError | None = None
        engine.add_done_callback(self._settle)

    def _settle(self, future: asyncio.Future[Transcription]) -> None:
        if self.value is not None:
            return
        if future.cancelled():  # withdrawn before the engine took it: a retry must run it again
            self.value = _stopped()
        elif (exc := future.exception()) is not None:
            self.value = _engine_error(exc, self.request.request_id)
        else:
            self.value = future.result()
        if self.claim is None:
            return
        if isinstance(self.value, ServerError):
            self._recent.fail(self.claim, self.value)
        else:
            self._recent.resolve(self.claim, self.value, sys.getsizeof(self.value.text))

    def outcome(self, timeout: Callable[[], RequestTimeoutError]) -> Transcription | ServerError:
        """The transcript or error, if the engine has settled it (its callback may not have run yet); else 504."""
        if self.value is None and self.engine.done():
            self._settle(self.engine)
        if self.value is None or self.engine.cancelled():
            return timeout()
        return self.value


def _joined(future: asyncio.Future[Any], timeout: Callable[[], RequestTimeoutError]) -> Transcription | ServerError:
    """What a request joined to another's key gets: that request's transcript or error, else a 504."""
    if not future.done() or future.cancelled():
        return timeout()
    if (exc := future.exception()) is not None:
        return exc if isinstance(exc, ServerError) else timeout()
    return future.result()  # the leader's transcript (the cache keeps nothing else)


def _stopped() -> RequestTimeoutError:
    return RequestTimeoutError("the first request with this id stopped before it was scored; retry")


def _engine_error(exc: BaseException, request_id: str) -> ServerError:
    if isinstance(exc, ShuttingDownError):  # the scheduler closed before the engine took it
        return exc
    # The engine's own message may hold paths or internals: it goes to the log only
    # (the scheduler logged the traceback once for the whole batch).
    log.error("transcription failed", extra={"request_id": request_id, "error": repr(exc)})
    return EngineError(f"the ASR engine failed on this request's batch (request id {request_id})")
