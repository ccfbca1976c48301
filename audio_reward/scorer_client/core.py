"""The client's decisions, made once for both faces.

As httpx's ``BaseClient`` serves its ``Client`` and ``AsyncClient``, this module holds what
:class:`~.async_client.AsyncScorerClient` and :class:`~.sync_client.ScorerClient` decide alike: the settings
built from the constructor's arguments (:class:`BaseScorerClient`), the request headers, the items made ready to
send, and what each answer means (a result, a retry or a final error).  Nothing here sends or waits: the
async face does the I/O (:mod:`.async_client`), and the sync face runs that one on a loop it owns.  The retry
policy lives in :mod:`.transport`.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError

from .. import __version__
from .errors import (
    AudioTooLongError,
    ProtocolViolationError,
    RequestRejectedError,
    ScorerError,
    TransientServerError,
)
from .settings import BATCH_PATH, INFO_PATH, ClientSettings, url_error
from .transport import (
    Answer,
    AsyncTransport,
    Fatal,
    Outcome,
    Response,
    Retry,
    Success,
    classify,
    for_request,
)
from .wire import (
    PreparedItem,
    ScoreItem,
    ScoreResult,
    as_score_item,
    decode_body,
    error_info,
    error_of_body,
    prepare,
    speaker_reference_id_of,
    to_result,
)

T = TypeVar("T")

# ---------------------------------------------------------------- construction


class BaseScorerClient:
    """What both client faces share: construction from settings or keyword arguments, and the closed state.

    Pass the scorer URL(s) with keyword settings, or one :class:`~.settings.ClientSettings`, not both.
    Each face sets up its I/O in :meth:`_open`.
    """

    def __init__(
        self,
        urls: str | Sequence[str] | None = None,
        *,
        settings: ClientSettings | None = None,
        transport: AsyncTransport | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        deadline: float | None = None,
        max_retries: int | None = None,
        backoff: float | None = None,
        backoff_max: float | None = None,
        retry_after_max: float | None = None,
        wait_while_busy: bool | None = None,
        pool_limit: int | None = None,
        concurrency: int | None = None,
        chunk_size: int | None = None,
    ) -> None:
        overrides = {
            "api_key": api_key, "timeout": timeout, "connect_timeout": connect_timeout, "deadline": deadline,
            "max_retries": max_retries, "backoff": backoff, "backoff_max": backoff_max,
            "retry_after_max": retry_after_max, "wait_while_busy": wait_while_busy,
            "pool_limit": pool_limit, "concurrency": concurrency, "chunk_size": chunk_size,
        }
        if settings is None:
            if urls is None:
                raise ValueError("pass the scorer URL(s) or a ClientSettings")
            try:
                settings = ClientSettings(urls, **{k: v for k, v in overrides.items() if v is not None})
            except ValidationError as exc:
                raise (url_error(exc) or exc) from None
        elif urls is not None or any(v is not None for v in overrides.values()):
            raise ValueError("pass either settings or URL and keyword settings, not both")
        self.settings: ClientSettings = settings
        self._closed = False
        self._open(transport)

    def _open(self, transport: AsyncTransport | None) -> None:
        """Set up the face's I/O for :attr:`settings` (``transport``: the caller's, or None for the default)."""
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        """True once the client is closed."""
        return self._closed


def request_headers(settings: ClientSettings) -> dict[str, str]:
    """The headers of every request: JSON, the client's name and version, the API key when set."""
    headers = {"Content-Type": "application/json", "User-Agent": f"audio-reward-client/{__version__}"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    return headers


# ---------------------------------------------------------------- requests


def chunking(settings: ClientSettings, concurrency: int | None, chunk_size: int | None) -> tuple[int, int]:
    """``score_many``'s chunks in flight and items per chunk: the arguments, else the settings'."""
    concurrency = settings.concurrency if concurrency is None else concurrency
    chunk_size = settings.chunk_size if chunk_size is None else chunk_size
    for name, value in (("concurrency", concurrency), ("chunk_size", chunk_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return concurrency, chunk_size


def _or_error(make: Callable[[Any], T], value: Any) -> T | ScorerError:
    """``make(value)``, or the :class:`ScorerError` it raised."""
    try:
        return make(value)
    except ScorerError as exc:
        return exc


def typed_items(items: Iterable[Any]) -> list[ScoreItem | ScorerError]:
    """Each item as a :class:`ScoreItem`, or the error saying why it is not one."""
    return [_or_error(as_score_item, item) for item in items]


def prepared_items(typed: Sequence[ScoreItem | ScorerError]) -> list[PreparedItem | ScorerError]:
    """Each item checked and its body serialized once, or the error saying why it cannot be sent."""
    return [item if isinstance(item, ScorerError) else _or_error(prepare, item) for item in typed]


def audio_bytes(typed: Sequence[ScoreItem | ScorerError]) -> int:
    """About how many bytes of audio the items hold (what encoding them costs)."""
    total = 0
    for item in typed:
        if isinstance(item, ScorerError):
            continue
        nbytes = getattr(item.waveform, "nbytes", None)
        if isinstance(nbytes, int):
            total += nbytes
        elif hasattr(item.waveform, "__len__"):
            total += 4 * len(item.waveform)
    return total


# ---------------------------------------------------------------- answers


def _checked(read: Callable[[], T]) -> Success[T] | Fatal:
    """``read()`` as a success, or the protocol violation it raised as a final error."""
    try:
        return Success(read())
    except ProtocolViolationError as exc:
        return Fatal(exc)


def _answered(answer: Answer, request_id: str, read: Callable[[bytes], T]) -> Outcome[T]:
    """What one answer means: ``read`` of its 200 body, a retry, or a final error."""
    outcome = classify(answer, request_id)
    if not isinstance(outcome, Success):
        return outcome
    return _checked(lambda: read(outcome.value))


def single_outcome(answer: Answer, request_id: str) -> Outcome[ScoreResult]:
    """What one answer to ``POST /v1/score`` means: the checked result, a retry, or a final error."""
    return _answered(answer, request_id, lambda raw: to_result(decode_body(raw, request_id), request_id))


def batch_outcomes(answer: Answer, items: Sequence[PreparedItem]) -> list[Outcome[ScoreResult]]:
    """What one answer to ``POST /v1/score/batch`` means for each of its items, in order.

    A fault of the whole batch (a transport fault, an error status) is each
    item's fault, carrying that item's request id; a 200 is read item by
    item (:func:`take_batch_answer`).
    """
    outcome = classify(answer)
    if isinstance(outcome, Success):
        return take_batch_answer(outcome.value, items)
    return [_for_item(outcome, item.request_id) for item in items]


def timed_out(outcome: Outcome[Any]) -> bool:
    """Whether ``outcome`` is a retry because time ran out: no answer in time, or the server's 504 ``timeout``."""
    cause = outcome.cause if isinstance(outcome, Retry) else None
    return isinstance(cause, asyncio.TimeoutError) or (
        isinstance(cause, TransientServerError) and (cause.status == 504 or cause.code == "timeout"))


def _for_item(outcome: Retry | Fatal, request_id: str) -> Retry | Fatal:
    """A whole-batch outcome as one item's: its error carries the item's request id."""
    if isinstance(outcome, Fatal):
        return Fatal(for_request(outcome.error, request_id))
    cause = outcome.cause
    return Retry(for_request(cause, request_id) if isinstance(cause, ScorerError) else cause, outcome.retry_after)


def take_batch_answer(raw: bytes, items: Sequence[PreparedItem]) -> list[Outcome[ScoreResult]]:
    """Read a 200 batch body: one outcome per item (a result, a retryable or a final item error).

    A body that breaks the protocol (not JSON, a result count that does not
    match) is a final :class:`ProtocolViolationError` for every item.
    """
    try:
        obj = decode_body(raw)
        results = obj.get("results") if isinstance(obj, dict) else None
        if not isinstance(results, list) or len(results) != len(items):
            got = len(results) if isinstance(results, list) else "no"
            raise ProtocolViolationError(f"a batch of {len(items)} items was answered with {got} results")
    except ProtocolViolationError as exc:
        return [Fatal(for_request(exc, item.request_id)) for item in items]
    outcomes: list[Outcome[ScoreResult]] = []
    for item, result in zip(items, results, strict=False):
        rid = item.request_id
        info = error_info(result)
        if info is None:
            outcomes.append(_checked(functools.partial(to_result, result, rid)))
        elif info.retryable:
            outcomes.append(Retry(TransientServerError(info.message, status=None, code=info.code, request_id=rid)))
        else:
            outcomes.append(Fatal(RequestRejectedError(info.message, status=None, code=info.code, request_id=rid)))
    return outcomes


def speaker_outcome(answer: Answer, request_id: str) -> Outcome[str]:
    """What one answer to ``POST /v1/speakers`` means: the reference id, a retry, or a final error."""
    return _answered(answer, request_id, speaker_reference_id_of)


def evicted(outcome: Outcome[Any]) -> bool:
    """Whether ``outcome`` is the server's ``unknown_speaker_reference``: it no longer holds the reference."""
    return (isinstance(outcome, Fatal) and isinstance(outcome.error, RequestRejectedError)
            and outcome.error.code == "unknown_speaker_reference")


def info_of(answer: Response) -> dict[str, Any]:
    """The object of a ``GET /v1/info`` answer; a refusal or a body that is no JSON object raises."""
    if answer.status != 200:
        info = error_of_body(answer.body, answer.status)
        raise RequestRejectedError(info.message, status=answer.status, code=info.code)
    obj = decode_body(answer.body)
    if not isinstance(obj, dict):
        raise ProtocolViolationError(f"GET {INFO_PATH} must answer a JSON object")
    return obj


# ---------------------------------------------------------------- what a server takes


@dataclass(frozen=True)
class ServerFacts:
    """What a server's ``GET /v1/info`` tells the client before it sends audio there."""

    batch: bool | None = None
    """Whether it has the batch endpoint; None when its answer does not say."""
    max_audio_seconds: float | None = None
    """The longest audio it scores; None when it does not say (the server still checks)."""


def read_facts(body: bytes) -> ServerFacts:
    """The facts in a 200 ``/v1/info`` body: each one read where it is well-formed, else unknown.

    Read field by field, not as a whole :class:`~audio_reward.protocol.InfoResponse`: another protocol v1
    server may list only its endpoints.
    """
    try:
        info = decode_body(body)
    except ProtocolViolationError:
        return ServerFacts()
    if not isinstance(info, dict):
        return ServerFacts()
    listed = info.get("endpoints")
    limits = info.get("limits")
    limit = limits.get("max_audio_seconds") if isinstance(limits, dict) else None
    seconds = float(limit) if isinstance(limit, (int, float)) and not isinstance(limit, bool) else math.nan
    usable = math.isfinite(seconds) and seconds > 0
    return ServerFacts(BATCH_PATH in listed if isinstance(listed, list) else None, seconds if usable else None)


def too_long(item: PreparedItem, facts: ServerFacts, base: str) -> AudioTooLongError | None:
    """The refusal of an item longer than the server's ``max_audio_seconds``; None when it may be sent."""
    limit = facts.max_audio_seconds
    if limit is None or item.duration_s <= limit:
        return None
    return AudioTooLongError(
        f"the audio is {item.duration_s:.1f} s long; the scorer at {base} takes at most {limit:g} s "
        "(max_audio_seconds in its /v1/info), so it was not sent",
        duration_s=item.duration_s, limit_s=limit, request_id=item.request_id)
