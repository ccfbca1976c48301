"""Request bodies out, validated results in: the client's side of protocol v1.

The client builds and reads the protocol's own models (:class:`~audio_reward.protocol.ScoreRequest`,
:class:`~audio_reward.protocol.ScoreResponse`, :class:`~audio_reward.protocol.SpeakerResponse`), so each
rule of the protocol is the model's; what is checked here is only what a model cannot see: samples given as
arrays or tensors, and a sample rate given as a numpy or torch scalar.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

import numpy as np
import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError

from ..protocol import (
    PROTOCOL_VERSION,
    ProtocolError,
    RewardOptions,
    ScoreRequest,
    ScoreResponse,
    SpeakerRequest,
    SpeakerResponse,
    as_float32_mono,
    encode_f32,
    is_finite_scalar,
    parse_json,
)
from ..protocol.audio import sample_issues
from ..protocol.models import MAX_SAMPLE_RATE, MIN_SAMPLE_RATE
from .errors import InvalidInputError, ProtocolViolationError

logger = logging.getLogger(__name__)

Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class ScoreResult:
    """One scored candidate: the reward, the server's flat diagnostics and the request id."""

    score: float
    request_id: str
    diagnostics: Mapping[str, Scalar] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Scalar]:
        """``{"score": ..., **diagnostics}``: the shape verl's reward functions return."""
        return {"score": self.score, **self.diagnostics}


@dataclass(frozen=True)
class ScoreItem:
    """One candidate for :meth:`AsyncScorerClient.score_many`."""

    waveform: Any
    sample_rate: int
    text: str
    language: str | None = None
    metadata: Mapping[str, Any] | None = None
    reward: RewardOptions | Mapping[str, Any] | None = None
    reference_duration_s: float | None = None
    request_id: str | None = None
    speaker_reference_id: str | None = None
    """A reference registered with :meth:`AsyncScorerClient.register_speaker`: the answer gains its similarity."""
    measure_quality: bool = False
    """Ask for DNSMOS (the ``dnsmos_*`` fields) although the reward does not weigh it (a server with a quality
    model; docs/signals.md)."""


class ScoreOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`AsyncScorerClient.score` and ``score_file``: a :class:`ScoreItem`'s fields
    after the audio and the text, each described there."""

    language: str | None
    metadata: Mapping[str, Any] | None
    reward: RewardOptions | Mapping[str, Any] | None
    reference_duration_s: float | None
    request_id: str | None
    speaker_reference_id: str | None
    measure_quality: bool


@dataclass(frozen=True)
class PreparedItem:
    """A request body serialized once, so every retry sends the same bytes and id."""

    request_id: str
    body: bytes
    duration_s: float = 0.0
    """Seconds of audio in the body, checked against the server's ``max_audio_seconds`` before sending."""
    speaker_reference_id: str | None = None


def new_request_id() -> str:
    return uuid.uuid4().hex


def as_score_item(item: Any) -> ScoreItem:
    """Accept a :class:`ScoreItem`, a mapping of its fields, or ``(waveform, sample_rate, text)``."""
    if isinstance(item, ScoreItem):
        return item
    if isinstance(item, Mapping):
        try:
            return ScoreItem(**item)
        except TypeError as exc:
            raise InvalidInputError(f"bad score item: {exc}") from None
    if isinstance(item, tuple) and len(item) == 3:
        return ScoreItem(*item)
    raise InvalidInputError(
        f"a score item must be a ScoreItem, a mapping or (waveform, sample_rate, text), got {type(item).__name__}"
    )


def check_sample_rate(value: Any) -> int:
    """The sample rate as an int (Hz) from an int, a whole float or a one-element array or tensor.

    Raises :class:`InvalidInputError` unless it is a whole number from
    ``MIN_SAMPLE_RATE`` to ``MAX_SAMPLE_RATE``, what the server accepts.
    """
    if hasattr(value, "item") and not isinstance(value, (int, float)):
        try:
            value = value.item()  # numpy / torch scalars and one-element arrays
        except (ValueError, RuntimeError):
            raise InvalidInputError(f"sample_rate must be one number, got shape {tuple(value.shape)}") from None
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not is_number or not math.isfinite(value) or int(value) != value:
        raise InvalidInputError(f"sample_rate must be an integer (Hz), got {value!r}")
    rate = int(value)
    if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise InvalidInputError(f"sample_rate must be from {MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE} Hz, got {rate}")
    return rate


def check_waveform(waveform: Any, name: str = "waveform") -> np.ndarray:
    """Mono float32 samples from a numpy array, CPU torch tensor or list, as the server will read them.

    Raises :class:`InvalidInputError`, naming the input ``name``, when it is
    not mono numbers, is empty, or holds NaN or infinite samples.
    """
    if isinstance(waveform, (str, os.PathLike)):
        # numpy reads a path as a 0-d array of text: "must be mono (1-D), got shape ()" would not say what to do.
        raise InvalidInputError(
            f"{name} is a file path ({os.fspath(waveform)!r}), not samples: score a file with "
            "score_file(path, text), or read it first (audio_reward.scorer_client.read_audio(path) gives "
            "samples and rate)")
    try:
        samples = as_float32_mono(waveform)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{name} is not mono numeric samples: {exc}") from None
    if issues := sample_issues(samples, name):  # the server's own rule, so both refuse the same samples alike
        raise InvalidInputError(issues[0].message)
    return samples


def sanitize_metadata(extra_info: Mapping[str, Any] | None) -> dict[str, Scalar]:
    """Reduce a trainer's ``extra_info`` to what protocol metadata may carry.

    The rule: keys become strings; strings, ints, bools and None are kept;
    floats are kept when finite; numpy/torch scalars (0-d arrays, one-element
    tensors) are unwrapped with ``.item()`` and judged the same way.
    Everything else is dropped: non-finite floats, sequences, mappings,
    arrays (the rollout's ``audio`` rides in ``extra_info`` and must not be
    sent twice).  Dropped keys are logged at DEBUG.
    """
    out: dict[str, Scalar] = {}
    dropped = []
    for key, value in (extra_info or {}).items():
        if hasattr(value, "item") and not isinstance(value, (str, bytes)):
            try:  # one-element arrays and tensors unwrap; larger ones raise and are dropped
                value = value.item()
            except (RuntimeError, ValueError, TypeError):
                dropped.append(key)
                continue
        if is_finite_scalar(value):
            out[str(key)] = value
        else:
            dropped.append(key)
    if dropped:
        logger.debug("extra_info keys dropped from metadata (not finite JSON scalars): %s", dropped)
    return out


def _reasons(exc: ValidationError) -> str:
    """The problems a model found, one ``field: why`` each, naming the field even where a validator raised."""
    return "; ".join(".".join(map(str, e["loc"] or ("body",))) + ": " + e["msg"].removeprefix("Value error, ")
                     for e in exc.errors(include_url=False))


def _dumped(model: type[BaseModel], what: str, named: str | None = None, **fields: Any) -> bytes:
    """``model``'s body for ``fields``; unset extensions stay off the wire, as in a verl-omni v1 body."""
    try:
        return orjson.dumps(model(**fields).model_dump(exclude_none=True))
    except ValidationError as exc:
        raise InvalidInputError(f"the {what} breaks protocol v1: {_reasons(exc)}",
                                request_id=named) from None


def prepare(item: Any) -> PreparedItem:
    """A candidate (see :func:`as_score_item`) as its request body; bad input raises :class:`InvalidInputError`.

    The samples and the rate are made wire-ready here; every other field is :class:`ScoreRequest`'s to judge.
    """
    item = as_score_item(item)
    request_id = item.request_id or new_request_id()
    named = request_id if isinstance(request_id, str) else None  # the id an error carries
    try:
        if not isinstance(item.text, str):  # the model would name it "prompt": the caller wrote text=
            raise InvalidInputError(f"text must be a string, got {type(item.text).__name__}")
        rate = check_sample_rate(item.sample_rate)
        samples = check_waveform(item.waveform)
    except InvalidInputError as exc:
        exc.request_id = named
        raise
    body = _dumped(
        ScoreRequest, "score request", named,
        protocol_version=PROTOCOL_VERSION, waveform_f32_base64=encode_f32(samples), num_samples=int(samples.size),
        sample_rate=rate, prompt=item.text, metadata=item.metadata or {}, request_id=request_id,
        language=item.language, reference_duration_s=item.reference_duration_s, reward=item.reward,
        speaker_reference_id=item.speaker_reference_id, measure_quality=True if item.measure_quality else None)
    return PreparedItem(request_id, body, samples.size / rate, item.speaker_reference_id)


def speaker_body(waveform: Any, sample_rate: int) -> tuple[str, bytes]:
    """A ``POST /v1/speakers`` body for a reference recording, and the sha256 of that body (the client's key)."""
    rate = check_sample_rate(sample_rate)
    samples = check_waveform(waveform, "speaker reference")
    body = _dumped(SpeakerRequest, "speaker reference", protocol_version=PROTOCOL_VERSION,
                   waveform_f32_base64=encode_f32(samples), num_samples=int(samples.size), sample_rate=rate)
    return hashlib.sha256(body).hexdigest(), body


def batch_body(items: list[PreparedItem]) -> bytes:
    """A batch envelope around already-serialized item bodies (no re-encoding of audio).

    One ``join`` makes one allocation: with megabytes of audio, each extra
    concatenation costs a full copy and its page faults.
    """
    head = b'{"protocol_version":"' + PROTOCOL_VERSION.encode() + b'","items":['
    return b"".join((head, b",".join(item.body for item in items), b"]}"))


def decode_body(raw: bytes, request_id: str | None = None) -> Any:
    try:
        return parse_json(raw)
    except ProtocolError as exc:
        raise ProtocolViolationError(f"the scorer answered malformed JSON: {exc}", request_id=request_id) from None


def to_result(obj: Any, request_id: str) -> ScoreResult:
    """One flat result, read as :class:`ScoreResponse` (a finite number for a score, scalar diagnostics)."""
    try:
        echoed = ScoreResponse.model_validate(obj).request_id
    except ValidationError as exc:
        raise ProtocolViolationError(f"the scorer's result breaks protocol v1: {_reasons(exc)}",
                                     request_id=request_id) from None
    if echoed is not None and echoed != request_id:
        raise ProtocolViolationError(
            f"the scorer answered request {echoed!r} to request {request_id!r}", request_id=request_id
        )
    return ScoreResult(float(obj["score"]), request_id, {k: v for k, v in obj.items() if k != "score"})


# The protocol's speaker_reference_id field read alone: an answer of another server may carry only the id.
_REFERENCE_ID: TypeAdapter[str] = TypeAdapter(Annotated[str, SpeakerResponse.model_fields["speaker_reference_id"]])


def speaker_reference_id_of(raw: bytes) -> str:
    """The id in a ``POST /v1/speakers`` answer; :class:`ProtocolViolationError` if it holds none."""
    obj = decode_body(raw)
    try:
        return _REFERENCE_ID.validate_python(obj.get("speaker_reference_id") if isinstance(obj, dict) else None)
    except ValidationError:
        raise ProtocolViolationError(
            f"the speaker registration answer holds no speaker_reference_id: {obj!r:.200}") from None


@dataclass(frozen=True)
class ErrorInfo:
    code: str
    message: str
    retryable: bool | None


def error_info(obj: Any) -> ErrorInfo | None:
    """The ``{"error": {...}}`` of an answer, or ``None`` when it is not one.

    Read field by field, so an error that breaks protocol v1 (a missing code, a non-boolean ``retryable``)
    still gives what it holds; a protocol v1 ``ErrorResponse`` reads the same as its model would.
    """
    if not isinstance(obj, dict) or "error" not in obj:
        return None
    err = obj["error"]
    if not isinstance(err, dict):
        return ErrorInfo("unknown", str(err), None)
    retryable = err.get("retryable")
    return ErrorInfo(str(err.get("code", "unknown")), str(err.get("message", err)),
                     retryable if isinstance(retryable, bool) else None)


def error_of_body(raw: bytes, status: int) -> ErrorInfo:
    """Best-effort reading of a non-200 body: a protocol error, or the raw text."""
    try:
        info = error_info(orjson.loads(raw))
    except orjson.JSONDecodeError:
        info = None
    return info or ErrorInfo(f"http_{status}", raw[:300].decode("utf-8", "replace").strip() or "(empty body)", None)
