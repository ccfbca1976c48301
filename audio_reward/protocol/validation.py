"""Decoding of protocol messages: the request models validate themselves, the audio is decoded here.

``decode_score_request`` is what a server calls: the :class:`ScoreRequest`
model checks the version, the fields and the server's limits (passed as
validation context); then the audio is decoded (base64, lengths, finiteness)
into a :class:`DecodedScoreRequest` holding a float32 waveform.  Every failure
is a :class:`ProtocolError` naming each field at fault.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import codecs
from .audio import EncodedAudio, FileDecoder, open_file, sample_issues
from .errors import Issue, ProtocolError, Refusal
from .models import (
    DEFAULT_LIMITS,
    MAX_SAMPLE_RATE,
    MESSAGES,
    MIN_SAMPLE_RATE,
    BatchItem,
    BatchScoreRequest,
    Limits,
    ScoreRequest,
    SpeakerRequest,
    check_version,
)
from .reward import RewardOptions

MessageKind = Literal["score_request", "score_response", "error", "batch_request", "batch_response",
                      "speaker_request", "speaker_response", "info_response"]


@dataclass(frozen=True)
class DecodedAudio:
    """A validated recording decoded to mono float32 at its own rate."""

    waveform: np.ndarray
    sample_rate: int
    encoding: str

    @property
    def duration_s(self) -> float:
        """Seconds of audio at its sample rate."""
        return len(self.waveform) / self.sample_rate


class DecodedScoreRequest(BaseModel):
    """A validated request with its audio decoded to mono float32.

    Pydantic builds it from the validated :class:`ScoreRequest` (or batch item): each field here that the
    request has is taken from it by name, so a request field the scorer reads is declared once, here; the
    audio encodings give way to the decoded ``waveform``, its ``sample_rate`` and ``encoding``.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="ignore")

    waveform: np.ndarray
    sample_rate: int
    prompt: str
    protocol_version: str
    encoding: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    language: str | None = None
    request_id: str | None = None
    reward: RewardOptions | None = None
    reference_duration_s: float | None = None
    speaker_reference_id: str | None = None
    speaker_reference: DecodedAudio | None = None
    """The inline reference recording (``speaker_reference_audio_base64``), decoded."""
    measure_quality: bool = False
    """The request asked for DNSMOS whatever its reward weighs (``measure_quality``)."""

    @property
    def duration_s(self) -> float:
        """Seconds of audio at the declared sample rate."""
        return len(self.waveform) / self.sample_rate


def parse_json(body: bytes | str) -> Any:
    """Parse a JSON body.

    orjson is tried first (fast); on failure the standard parser gets a second
    look so that ``NaN``/``Infinity`` literals, which Python's ``json.dumps``
    writes, reach validation and get an error naming their field.
    """
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as fast_error:
        if isinstance(body, bytes):
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                # orjson's own words here ("surrogates not allowed") do not say what was sent.
                raise ProtocolError.single(
                    "malformed_json", f"body is not JSON: it is not UTF-8 text, {codecs.describe_bytes(body)}"
                ) from None
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise ProtocolError.single("malformed_json", f"body is not valid JSON ({fast_error})") from None


def _path(loc: tuple[Any, ...], prefix: str = "$") -> str:
    return prefix + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


_CODE_BY_FIELD = {
    "sample_rate": "invalid_sample_rate",
    "metadata": "invalid_metadata",
    "prompt": "invalid_prompt",
    "num_samples": "invalid_num_samples",
    "reward": "invalid_reward_options",
    "protocol_version": "unsupported_protocol_version",
    "speaker_reference_id": "invalid_speaker_reference",
}

_HINT_BY_FIELD = {
    "sample_rate": f"sample_rate must be an integer from {MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE} Hz",
    "prompt": "prompt must be a string: the target text",
}


def issues_from_pydantic(exc: ValidationError, prefix: str = "$") -> list[Issue]:
    """Map pydantic errors to protocol issues with stable codes and JSON paths.

    A protocol rule of the models (:class:`~audio_reward.protocol.errors.Refusal`) keeps its own code,
    message and field; pydantic's own errors get the code of the field at fault.
    """
    issues = []
    for err in exc.errors(include_url=False):
        loc = tuple(err.get("loc", ()))
        top = next((p for p in loc if isinstance(p, str) and p in _CODE_BY_FIELD), None)
        refusal = (err.get("ctx") or {}).get("error")
        if isinstance(refusal, Refusal):
            code, msg = refusal.code, str(refusal)
            loc += (refusal.field,) if refusal.field else ()
        elif err["type"] == "extra_forbidden":
            code, msg = "unknown_field", f"unknown field {loc[-1]!r}"
        elif loc == ("items",):  # every error of the batch's items (missing, wrong type, empty) reads the same
            code, msg = "invalid_request", "items must be a non-empty array of score requests"
        elif err["type"] == "missing":
            code, msg = "missing_field", f"required field {loc[-1]!r} is missing"
        else:
            code = _CODE_BY_FIELD.get(top or "", "invalid_request")
            msg = err["msg"].removeprefix("Value error, ")
            if top in _HINT_BY_FIELD:
                msg = f"{msg} ({_HINT_BY_FIELD[top]})"
        issues.append(Issue(code, msg, _path(loc, prefix)))
    return issues


Request = TypeVar("Request", bound=BaseModel)


def _validated(model: type[Request], obj: Any, path: str = "$", **context: Any) -> Request:
    """``obj`` validated by ``model`` with the receiver's context; :class:`ProtocolError` naming every issue."""
    try:
        return model.model_validate(obj, context=context)
    except ValidationError as exc:
        raise ProtocolError(issues_from_pydantic(exc, path)) from None


def _open(name: str, text: str, rate: int | None, limits: Limits, path: str, decoder: FileDecoder | None = None,
          whose: str = "the file's") -> EncodedAudio:
    """Field ``name``'s audio bytes (raw samples at ``rate``, or a whole file when it is None), its rate and its
    size from lengths and headers, decoding no sample (a file only ``decoder`` reads is decoded, bounded as it
    decodes)."""
    try:
        raw = codecs.b64decode(text, field=name)
        if rate is not None:
            return EncodedAudio(name, raw, rate)
        return open_file(raw, field=name, max_seconds=limits.max_audio_seconds, max_bytes=limits.max_audio_bytes,
                         decoder=decoder, rates=(MIN_SAMPLE_RATE, MAX_SAMPLE_RATE), whose=whose)
    except codecs.AudioDecodeError as exc:
        raise ProtocolError.single(exc.code, str(exc), f"{path}.{name}") from None


def _samples(audio: EncodedAudio, limits: Limits, path: str, budget: int | None = None,
             num_samples: int | None = None) -> np.ndarray:
    """The audio's samples, decoded and checked against ``num_samples``, emptiness, finiteness and the limit;
    a file of unknown length stops at its limit or at ``budget`` (what the batch's other items left)."""
    name, fpath = audio.field, f"{path}.{audio.field}"
    try:
        waveform = audio.decode(limits.max_audio_seconds, limits.max_audio_bytes, budget)
    except codecs.AudioDecodeError as exc:
        if exc.code == "batch_too_large":
            raise ProtocolError.single(
                exc.code, f"{name} has no declared length and the batch's decoded audio passed its budget of "
                f"{limits.max_batch_audio_bytes} bytes (max_batch_audio_bytes)", fpath) from None
        raise ProtocolError.single(exc.code, str(exc), fpath) from None
    n = int(waveform.shape[0])
    issues = []
    if num_samples is not None and num_samples != n:
        issues.append(Issue("num_samples_mismatch",
                            f"num_samples is {num_samples} but {name} holds {n} samples", f"{path}.num_samples"))
    issues += sample_issues(waveform, name, fpath)
    if n / audio.rate > limits.max_audio_seconds:
        issues.append(Issue("audio_too_long", f"{name} holds {n / audio.rate:.2f} s of audio; the limit is "
                            f"{limits.max_audio_seconds:g} s (max_audio_seconds)", fpath))
    if issues:
        raise ProtocolError(issues)
    return waveform


@dataclass
class _Checked:
    """A request that passed every check that needs no decoded sample."""

    req: ScoreRequest | BatchItem
    audio: EncodedAudio
    path: str
    version: str


def _check_request(obj: Any, limits: Limits, path: str, batch_version: str | None,
                   decoder: FileDecoder | None) -> _Checked:
    req: ScoreRequest | BatchItem = (_validated(BatchItem, obj, path, limits=limits) if batch_version is not None
                                     else _validated(ScoreRequest, obj, path, limits=limits))
    audio = _open(req.audio_field, getattr(req, req.audio_field), req.sample_rate, limits, path, decoder)
    return _Checked(req, audio, path, req.protocol_version or batch_version or "1")


def _finish(checked: _Checked, limits: Limits, budget: int | None = None) -> DecodedScoreRequest:
    req, audio, path = checked.req, checked.audio, checked.path
    decoded = {"waveform": _samples(audio, limits, path, budget, req.num_samples), "sample_rate": audio.rate,
               "protocol_version": checked.version, "encoding": audio.field,
               "speaker_reference": _speaker_reference(req, limits, path), "measure_quality": bool(req.measure_quality)}
    return DecodedScoreRequest.model_validate({**dict(req), **decoded})


def decode_score_request(
    obj: Any,
    limits: Limits = DEFAULT_LIMITS,
    *,
    decoder: FileDecoder | None = None,
) -> DecodedScoreRequest:
    """Validate one score request (a parsed JSON object) and decode its audio.

    Sizes (prompt, metadata, audio duration and decoded bytes) are checked
    before the audio is decoded (a batch's items: :func:`decode_batch_request`).  ``decoder``
    reads the files libsndfile does not (the server passes FFmpeg's).
    """
    return _finish(_check_request(obj, limits, "$", None, decoder), limits)


class _BatchBudget:
    """The decoded audio bytes a batch has left (``max_batch_audio_bytes``), spent item by item."""

    def __init__(self, limit: int) -> None:
        self.limit = self.left = limit

    def spend(self, nbytes: int, message: str = "") -> None:
        """Take ``nbytes``; with a ``message``, refuse the whole batch once the budget is overspent."""
        self.left -= nbytes
        if message and self.left < 0:
            raise ProtocolError.single("batch_too_large", message.format(limit=self.limit), "$.items")


def decode_batch_request(
    obj: Any, limits: Limits = DEFAULT_LIMITS, *, decoder: FileDecoder | None = None
) -> tuple[str, list[DecodedScoreRequest | ProtocolError]]:
    """Validate a batch envelope; each item decodes on its own.

    The envelope failing raises, and so does a batch whose items declare more
    decoded audio together than ``max_batch_audio_bytes`` (checked from
    lengths and headers before any item is decoded).  An item failing becomes
    that item's :class:`ProtocolError` in the returned list, in request order.
    Items of unknown length share what is left of the budget, in order.
    """
    try:
        envelope = _validated(BatchScoreRequest, obj, limits=limits, items_apart=True)
    except ProtocolError as exc:
        # Unknown fields say the body is something else (one score request sent here): they are named alone.
        unknown = sorted((i for i in exc.issues if i.code == "unknown_field"), key=lambda i: i.path)
        raise ProtocolError(unknown or exc.issues) from None
    version, budget = envelope.protocol_version, _BatchBudget(limits.max_batch_audio_bytes)
    checked: list[_Checked | ProtocolError] = []
    for i, item in enumerate(envelope.items):
        try:
            entry = _check_request(item, limits, f"$.items[{i}]", version, decoder)
        except ProtocolError as exc:
            checked.append(exc)
            continue
        checked.append(entry)
        if entry.audio.samples is not None:  # decoded already (a file only the decoder reads): count it now
            budget.spend(entry.audio.decoded_bytes or 0,
                         "the batch's items decode to more than {limit} bytes of float32 audio together "
                         "(max_batch_audio_bytes): send fewer or shorter items per batch")
    ok = [c for c in checked if isinstance(c, _Checked)]
    declared = sum(c.audio.decoded_bytes or 0 for c in ok)
    budget.spend(sum(c.audio.decoded_bytes or 0 for c in ok if c.audio.samples is None),
                 f"the batch's items decode to {declared} bytes of float32 audio together; the limit is "
                 "{limit} bytes (max_batch_audio_bytes): send fewer or shorter items per batch")
    return version, [entry if isinstance(entry, ProtocolError) else _finish_item(entry, limits, budget)
                     for entry in checked]


def _finish_item(entry: _Checked, limits: Limits, budget: _BatchBudget) -> DecodedScoreRequest | ProtocolError:
    """Decode one checked item; those of unknown length, and inline references, share the budget in order."""
    unknown_length = entry.audio.decoded_bytes is None
    try:
        decoded = _finish(entry, limits, budget=budget.left if unknown_length else None)
    except ProtocolError as exc:
        return exc
    if unknown_length:
        budget.spend(decoded.waveform.nbytes * entry.audio.channels)
    if decoded.speaker_reference is not None:
        # Inline references share the batch's budget: a batch of tiny FLAC files must not decode to gigabytes.
        budget.spend(decoded.speaker_reference.waveform.nbytes,
                     "the batch's audio and inline speaker references decode to more than {limit} bytes together "
                     "(max_batch_audio_bytes): register the references with POST /v1/speakers and send "
                     "speaker_reference_id")
    return decoded


_KIND_BY_KEY: tuple[tuple[str, MessageKind], ...] = (
    ("items", "batch_request"), ("results", "batch_response"), ("error", "error"), ("score", "score_response"),
)


def detect_kind(obj: Any) -> MessageKind:
    """Guess a message's kind from its top-level keys (the first of :data:`_KIND_BY_KEY` it holds)."""
    keys = obj if isinstance(obj, dict) else {}
    return next((kind for key, kind in _KIND_BY_KEY if key in keys), "score_request")


def validate_message(
    obj: Any, kind: MessageKind | None = None, limits: Limits = DEFAULT_LIMITS
) -> tuple[MessageKind, list[Issue]]:
    """Every issue of a parsed message; an empty list means valid.

    Requests get the full audio checks; responses the schema and flatness checks.
    """
    kind = kind or detect_kind(obj)
    requests = ("score_request", "speaker_request", "batch_request")
    issues: list[Issue] = []
    try:
        if kind == "batch_request":
            _, items = decode_batch_request(obj, limits)
            issues = [issue for item in items if isinstance(item, ProtocolError) for issue in item.issues]
        elif kind in requests:
            (decode_score_request if kind == "score_request" else decode_speaker_request)(obj, limits)
        elif kind == "batch_response" and isinstance(obj, dict):
            check_version(obj, required=False)
    except ProtocolError as exc:
        issues = exc.issues
    except Refusal as exc:
        issues = [Issue(exc.code, str(exc), f"$.{exc.field}")]
    if kind not in requests:  # a response: its version (above) and every schema issue besides
        try:
            MESSAGES[kind].model_validate(obj)
        except ValidationError as exc:
            issues += issues_from_pydantic(exc)
    return kind, issues


REFERENCE_FIELD = "speaker_reference_audio_base64"


def _speaker_reference(req: ScoreRequest | BatchItem, limits: Limits, path: str) -> DecodedAudio | None:
    """The inline reference recording, bounded like the item's own audio (``max_audio_seconds``, bytes)."""
    if (text := req.speaker_reference_audio_base64) is None:
        return None
    # A whole file, opened and checked as a request's audio_file_base64 is (no FFmpeg: WAV or FLAC).
    audio = _open(REFERENCE_FIELD, text, None, limits, path, whose="the reference's")
    return DecodedAudio(_samples(audio, limits, path), audio.rate, REFERENCE_FIELD)


def decode_speaker_request(obj: Any, limits: Limits = DEFAULT_LIMITS) -> DecodedAudio:
    """Validate a ``POST /v1/speakers`` body (a parsed JSON object) and decode its recording.

    The recording takes the same encodings, checks and limits as a score request's audio.
    """
    req = _validated(SpeakerRequest, obj, limits=limits)
    audio = _open(req.audio_field, getattr(req, req.audio_field), req.sample_rate, limits, "$")
    return DecodedAudio(_samples(audio, limits, "$", num_samples=req.num_samples), audio.rate, audio.field)
