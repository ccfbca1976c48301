"""Validation and decoding of protocol messages.

``decode_score_request`` is what a server calls: it checks the version, the
shape (pydantic) and the audio (base64, lengths, finiteness, limits) and
returns a :class:`DecodedScoreRequest` holding a float32 waveform, or raises
:class:`ProtocolError` naming every field at fault.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from . import codecs
from .errors import Issue, ProtocolError
from .models import (
    MAX_SAMPLE_RATE,
    MESSAGES,
    MIN_SAMPLE_RATE,
    BatchItem,
    BatchScoreRequest,
    ScoreRequest,
    SpeakerRequest,
)
from .reward import RewardOptions
from .version import SUPPORTED_VERSIONS, is_supported

MessageKind = Literal["score_request", "score_response", "error", "batch_request", "batch_response",
                      "speaker_request", "speaker_response", "info_response"]

AUDIO_FIELDS = ("waveform_f32_base64", "waveform_pcm16_base64", "audio_file_base64")


@dataclass(frozen=True)
class Limits:
    """Bounds a receiver enforces on top of the schema; each field is a server setting of the same name."""

    max_audio_seconds: float = 60.0
    max_batch_items: int = 256
    max_prompt_chars: int = 10_000
    max_metadata_keys: int = 128
    max_metadata_key_chars: int = 256
    max_metadata_value_chars: int = 10_000
    max_audio_bytes: int = 64 * 2**20
    """Decoded float32 bytes (every channel) of one item."""
    max_batch_audio_bytes: int = 256 * 2**20
    """Decoded float32 bytes of every item of one batch together."""


DEFAULT_LIMITS = Limits()


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
    """Map pydantic errors to protocol issues with stable codes and JSON paths."""
    issues = []
    for err in exc.errors(include_url=False):
        loc = tuple(err.get("loc", ()))
        top = next((p for p in loc if isinstance(p, str) and p in _CODE_BY_FIELD), None)
        if err["type"] == "extra_forbidden":
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


def _check_version(obj: dict[str, Any], path: str, *, required: bool = True) -> None:
    version = obj.get("protocol_version")
    if version is None and not required:
        return
    if "protocol_version" not in obj:
        raise ProtocolError.single(
            "missing_field",
            f"required field 'protocol_version' is missing; send \"protocol_version\": \"{SUPPORTED_VERSIONS[-1]}\"",
            f"{path}.protocol_version",
        )
    if not is_supported(version):
        raise ProtocolError.single(
            "unsupported_protocol_version",
            f"protocol_version {version!r} is not supported; supported: {', '.join(SUPPORTED_VERSIONS)}",
            f"{path}.protocol_version",
        )


@dataclass
class _Audio:
    """An item's audio after its cheap checks: raw bytes, rate, and the decoded size when known."""

    name: str
    raw: bytes
    rate: int
    header: codecs.FileHeader | None = None
    samples: np.ndarray | None = None
    """Already decoded (by a :class:`~.codecs.FileDecoder`, bounded as it decoded)."""

    @property
    def decoded_bytes(self) -> int | None:
        if self.samples is not None:
            return int(self.samples.nbytes)
        if self.header is not None:
            return self.header.decoded_bytes
        return len(self.raw) * (1 if self.name == "waveform_f32_base64" else 2)


def _check_text_limits(obj: dict[str, Any], limits: Limits, path: str) -> None:
    """Prompt and metadata sizes, checked on the raw JSON before any other work."""
    prompt = obj.get("prompt")
    if isinstance(prompt, str) and len(prompt) > limits.max_prompt_chars:
        raise ProtocolError.single(
            "prompt_too_long",
            f"prompt holds {len(prompt)} characters; the limit is {limits.max_prompt_chars} (max_prompt_chars)",
            f"{path}.prompt",
        )
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return
    if len(metadata) > limits.max_metadata_keys:
        raise ProtocolError.single(
            "metadata_too_large",
            f"metadata holds {len(metadata)} keys; the limit is {limits.max_metadata_keys} (max_metadata_keys)",
            f"{path}.metadata",
        )
    for key, value in metadata.items():
        if len(key) > limits.max_metadata_key_chars:
            raise ProtocolError.single(
                "metadata_too_large",
                f"a metadata key holds {len(key)} characters; the limit is {limits.max_metadata_key_chars} "
                "(max_metadata_key_chars)",
                f"{path}.metadata",
            )
        if isinstance(value, str) and len(value) > limits.max_metadata_value_chars:
            raise ProtocolError.single(
                "metadata_too_large",
                f"metadata[{key[:40]!r}] holds {len(value)} characters; the limit is "
                f"{limits.max_metadata_value_chars} (max_metadata_value_chars)",
                f"{path}.metadata",
            )


def _read_other_file(raw: bytes, name: str, fpath: str, limits: Limits, decoder: codecs.FileDecoder) -> _Audio | None:
    """A file libsndfile does not read, decoded by ``decoder`` within the limits; None when it is no audio."""
    decoded = decoder.decode(raw, name, limits.max_audio_seconds, limits.max_audio_bytes)
    if decoded is None:
        return None
    samples, rate = decoded
    if samples.nbytes > limits.max_audio_bytes:
        raise ProtocolError.single(
            "audio_too_large",
            f"{name} decodes to {samples.nbytes} bytes of float32 samples; the limit is {limits.max_audio_bytes} "
            "bytes (max_audio_bytes)", fpath)
    return _Audio(name, raw, rate, samples=samples)


def _audio_field(req: ScoreRequest | BatchItem | SpeakerRequest, path: str) -> str:
    """The one audio encoding the request uses."""
    present = [name for name in AUDIO_FIELDS if getattr(req, name) is not None]
    if len(present) == 1:
        return present[0]
    if present:
        message = f"exactly one audio encoding is allowed, found {len(present)}: {', '.join(present)}"
    else:
        message = f"the audio is missing: send one of {', '.join(AUDIO_FIELDS)}"
    raise ProtocolError.single("invalid_audio_encoding", message, path)


def _read_file(req: ScoreRequest | BatchItem | SpeakerRequest, text: str, limits: Limits, path: str,
               decoder: codecs.FileDecoder | None) -> _Audio:
    """``audio_file_base64``: the rate and the size from the file's header (another format through ``decoder``)."""
    name, fpath = "audio_file_base64", f"{path}.audio_file_base64"
    if req.sample_rate is not None:
        raise ProtocolError.single("invalid_sample_rate",
                                   "sample_rate must be omitted with audio_file_base64 (the file header gives it)",
                                   f"{path}.sample_rate")
    raw = codecs.b64decode(text, field=name)
    try:
        header = _file_header(raw, name, limits, fpath, "the file's",
                              decoder.formats if decoder is not None else codecs.FILE_FORMATS)
    except codecs.AudioDecodeError as exc:
        other = None
        if decoder is not None and exc.code == "invalid_audio_file":
            other = _read_other_file(raw, name, fpath, limits, decoder)
        if other is None:
            raise
        return other
    return _Audio(name, raw, header.sample_rate, header)


def _file_header(raw: bytes, name: str, limits: Limits, fpath: str, whose: str,
                 formats: str = codecs.FILE_FORMATS) -> codecs.FileHeader:
    """A file's header, once its rate is in range and the size it declares is within the limits."""
    header = codecs.read_file_header(raw, field=name, formats=formats)
    if not MIN_SAMPLE_RATE <= header.sample_rate <= MAX_SAMPLE_RATE:
        raise ProtocolError.single(
            "invalid_sample_rate",
            f"{whose} sample rate {header.sample_rate} Hz is outside {MIN_SAMPLE_RATE}–{MAX_SAMPLE_RATE} Hz",
            fpath,
        )
    codecs.check_file_size(header, field=name, max_seconds=limits.max_audio_seconds, max_bytes=limits.max_audio_bytes)
    return header


def _read_samples(req: ScoreRequest | BatchItem | SpeakerRequest, name: str, text: str, limits: Limits,
                  path: str) -> _Audio:
    """A raw-samples encoding: ``sample_rate`` required, and the size bounded from the base64 length."""
    if req.sample_rate is None:
        raise ProtocolError.single("missing_field", f"sample_rate is required with {name}", f"{path}.sample_rate")
    rate, fpath = req.sample_rate, f"{path}.{name}"
    # Reject an oversized payload from its base64 length, before decoding it.
    width = 4 if name == "waveform_f32_base64" else 2
    approx_samples = len(text) * 3 // 4 // width
    if approx_samples / rate > limits.max_audio_seconds + 1:
        raise ProtocolError.single(
            "audio_too_long",
            f"{name} holds about {approx_samples / rate:.1f} s of audio; the limit is "
            f"{limits.max_audio_seconds:g} s (max_audio_seconds)",
            fpath,
        )
    if approx_samples * 4 > limits.max_audio_bytes + 4:
        raise ProtocolError.single(
            "audio_too_large",
            f"{name} decodes to about {approx_samples * 4} bytes of float32 samples; the limit is "
            f"{limits.max_audio_bytes} bytes (max_audio_bytes)",
            fpath,
        )
    return _Audio(name, codecs.b64decode(text, field=name), rate)


def _read_audio(req: ScoreRequest | BatchItem | SpeakerRequest, limits: Limits, path: str,
                decoder: codecs.FileDecoder | None = None) -> _Audio:
    """Base64-decode the audio field and check its size from lengths and headers, decoding no sample."""
    name = _audio_field(req, path)
    text = getattr(req, name) or ""
    try:
        if name == "audio_file_base64":
            return _read_file(req, text, limits, path, decoder)
        return _read_samples(req, name, text, limits, path)
    except codecs.AudioDecodeError as exc:
        raise ProtocolError.single(exc.code, str(exc), f"{path}.{name}") from None


def _decode_samples(audio: _Audio, limits: Limits, path: str, budget: int | None) -> np.ndarray:
    """The item's mono float32 samples; an unknown-length file stops at its limit or at ``budget``."""
    if audio.samples is not None:
        return audio.samples
    limit_name = ""
    try:
        if audio.name == "waveform_f32_base64":
            return codecs.frombuffer_f32(audio.raw, field=audio.name)
        if audio.name == "waveform_pcm16_base64":
            return codecs.frombuffer_pcm16(audio.raw, field=audio.name)
        assert audio.header is not None
        max_frames, limit_name = codecs.max_frames_for(audio.header, limits.max_audio_seconds, limits.max_audio_bytes)
        if budget is not None and audio.header.frames is None:
            budget_frames = budget // (audio.header.channels * 4)
            if max_frames is None or budget_frames < max_frames:
                max_frames, limit_name = budget_frames, "max_batch_audio_bytes"
        return codecs.decode_file_bytes(audio.raw, audio.header, field=audio.name, max_frames=max_frames,
                                        limit_name=limit_name)
    except codecs.AudioDecodeError as exc:
        if exc.code == "audio_too_long" and limit_name == "max_batch_audio_bytes":
            raise ProtocolError.single(
                "batch_too_large",
                f"{audio.name} has no declared length and the batch's decoded audio passed its budget of "
                f"{limits.max_batch_audio_bytes} bytes (max_batch_audio_bytes)",
                f"{path}.{audio.name}",
            ) from None
        raise ProtocolError.single(exc.code, str(exc), f"{path}.{audio.name}") from None


def _samples(req: ScoreRequest | BatchItem | SpeakerRequest, audio: _Audio, limits: Limits, path: str,
             budget: int | None = None) -> np.ndarray:
    """The audio's samples, decoded and checked against ``num_samples``, emptiness, finiteness and the limit."""
    waveform = _decode_samples(audio, limits, path, budget)
    name, n = audio.name, int(waveform.shape[0])
    issues = []
    if req.num_samples is not None and req.num_samples != n:
        issues.append(Issue("num_samples_mismatch",
                            f"num_samples is {req.num_samples} but {name} holds {n} samples", f"{path}.num_samples"))
    if n == 0:
        issues.append(Issue("empty_audio", f"{name} holds no samples", f"{path}.{name}"))
    elif not np.isfinite(waveform).all():
        bad = int(np.count_nonzero(~np.isfinite(waveform)))
        issues.append(Issue("non_finite_audio", f"{name} holds {bad} NaN or infinite samples", f"{path}.{name}"))
    if n / audio.rate > limits.max_audio_seconds:
        issues.append(Issue("audio_too_long",
                            f"{name} holds {n / audio.rate:.2f} s of audio; the limit is "
                            f"{limits.max_audio_seconds:g} s (max_audio_seconds)",
                            f"{path}.{name}"))
    if issues:
        raise ProtocolError(issues)
    return waveform


@dataclass
class _Checked:
    """A request that passed every check that needs no decoded sample."""

    req: ScoreRequest | BatchItem
    audio: _Audio
    path: str
    version: str


def _check_request(obj: Any, limits: Limits, path: str, batch_version: str | None,
                   decoder: codecs.FileDecoder | None = None) -> _Checked:
    if not isinstance(obj, dict):
        raise ProtocolError.single(
            "invalid_request", f"a score request must be a JSON object, got {type(obj).__name__}", path
        )
    _check_version(obj, path, required=batch_version is None)
    _check_text_limits(obj, limits, path)
    model = BatchItem if batch_version is not None else ScoreRequest
    try:
        req = model.model_validate(obj)
    except ValidationError as exc:
        raise ProtocolError(issues_from_pydantic(exc, path)) from None
    audio = _read_audio(req, limits, path, decoder)
    return _Checked(req, audio, path, req.protocol_version or batch_version or "1")


def _finish(checked: _Checked, limits: Limits, budget: int | None = None) -> DecodedScoreRequest:
    req, audio, path = checked.req, checked.audio, checked.path
    decoded = {"waveform": _samples(req, audio, limits, path, budget), "sample_rate": audio.rate,
               "protocol_version": checked.version, "encoding": audio.name,
               "speaker_reference": _speaker_reference(req, limits, path), "measure_quality": bool(req.measure_quality)}
    return DecodedScoreRequest.model_validate({**dict(req), **decoded})


def decode_score_request(
    obj: Any,
    limits: Limits = DEFAULT_LIMITS,
    *,
    path: str = "$",
    batch_version: str | None = None,
    decoder: codecs.FileDecoder | None = None,
) -> DecodedScoreRequest:
    """Validate one score request (a parsed JSON object) and decode its audio.

    Sizes (prompt, metadata, audio duration and decoded bytes) are checked
    before the audio is decoded.  Inside a batch pass ``batch_version``: the
    item's own version may be omitted and then takes the batch's.  ``decoder``
    reads the files libsndfile does not (the server passes FFmpeg's).
    """
    return _finish(_check_request(obj, limits, path, batch_version, decoder), limits)


def decode_batch_request(
    obj: Any, limits: Limits = DEFAULT_LIMITS, *, decoder: codecs.FileDecoder | None = None
) -> tuple[str, list[DecodedScoreRequest | ProtocolError]]:
    """Validate a batch envelope; each item decodes on its own.

    The envelope failing raises, and so does a batch whose items declare more
    decoded audio together than ``max_batch_audio_bytes`` (checked from
    lengths and headers before any item is decoded).  An item failing becomes
    that item's :class:`ProtocolError` in the returned list, in request order.
    Items of unknown length share what is left of the budget, in order.
    """
    version, items = _check_envelope(obj, limits)
    checked = _check_items(items, limits, version, decoder)
    declared = sum(c.audio.decoded_bytes or 0 for c in checked if isinstance(c, _Checked))
    if declared > limits.max_batch_audio_bytes:
        raise ProtocolError.single(
            "batch_too_large",
            f"the batch's items decode to {declared} bytes of float32 audio together; the limit is "
            f"{limits.max_batch_audio_bytes} bytes (max_batch_audio_bytes): send fewer or shorter items per batch",
            "$.items",
        )
    return version, _finish_items(checked, limits, limits.max_batch_audio_bytes - declared)


class _BatchEnvelope(BaseModel):
    """A batch request's own fields, as :class:`BatchScoreRequest` declares them, its items left unread: each
    item is checked and decoded on its own (:func:`_check_items`), so one bad item fails alone."""

    model_config = BatchScoreRequest.model_config

    protocol_version: StrictStr
    items: list[Any] = Field(..., min_length=1)


def _check_envelope(obj: Any, limits: Limits) -> tuple[str, list[Any]]:
    """The batch's version and items; an unknown field, or no items, refuses the whole batch."""
    if not isinstance(obj, dict):
        raise ProtocolError.single("invalid_request", "a batch request must be a JSON object", "$")
    _check_version(obj, "$")
    try:
        envelope = _BatchEnvelope.model_validate(obj)
    except ValidationError as exc:
        issues = issues_from_pydantic(exc)
        # Unknown fields say the body is something else (one score request sent here): they are named alone.
        unknown = sorted((i for i in issues if i.code == "unknown_field"), key=lambda i: i.path)
        raise ProtocolError(unknown or issues) from None
    if len(envelope.items) > limits.max_batch_items:
        raise ProtocolError.single(
            "batch_too_large",
            f"items holds {len(envelope.items)} requests; the limit is {limits.max_batch_items} (max_batch_items)",
            "$.items",
        )
    return envelope.protocol_version, envelope.items


def _check_items(items: list[Any], limits: Limits, version: str,
                 decoder: codecs.FileDecoder | None) -> list[_Checked | ProtocolError]:
    """Every item through the checks that decode no sample; files only the decoder reads count as they decode."""
    checked: list[_Checked | ProtocolError] = []
    predecoded = 0
    for i, item in enumerate(items):
        try:
            item_checked = _check_request(item, limits, f"$.items[{i}]", version, decoder)
        except ProtocolError as exc:
            checked.append(exc)
            continue
        checked.append(item_checked)
        if item_checked.audio.samples is not None:  # decoded already (a file only the decoder reads): count it now
            predecoded += item_checked.audio.samples.nbytes
            if predecoded > limits.max_batch_audio_bytes:
                raise ProtocolError.single(
                    "batch_too_large",
                    f"the batch's items decode to more than {limits.max_batch_audio_bytes} bytes of float32 audio "
                    "together (max_batch_audio_bytes): send fewer or shorter items per batch", "$.items")
    return checked


def _finish_items(checked: list[_Checked | ProtocolError], limits: Limits,
                  left: int) -> list[DecodedScoreRequest | ProtocolError]:
    """Decode each checked item; those of unknown length, and inline references, share ``left`` bytes in order."""
    out: list[DecodedScoreRequest | ProtocolError] = []
    for entry in checked:
        if isinstance(entry, ProtocolError):
            out.append(entry)
            continue
        unknown_length = entry.audio.decoded_bytes is None
        try:
            decoded = _finish(entry, limits, budget=left if unknown_length else None)
        except ProtocolError as exc:
            out.append(exc)
            continue
        if unknown_length:
            left -= decoded.waveform.nbytes * (entry.audio.header.channels if entry.audio.header else 1)
        if decoded.speaker_reference is not None:
            # Inline references share the batch's budget: a batch of tiny FLAC files must not decode to gigabytes.
            left -= decoded.speaker_reference.waveform.nbytes
            if left < 0:
                raise ProtocolError.single(
                    "batch_too_large",
                    f"the batch's audio and inline speaker references decode to more than "
                    f"{limits.max_batch_audio_bytes} bytes together (max_batch_audio_bytes): register the "
                    "references with POST /v1/speakers and send speaker_reference_id",
                    "$.items",
                )
        out.append(decoded)
    return out


def detect_kind(obj: Any) -> MessageKind:
    """Guess a message's kind from its top-level keys."""
    if isinstance(obj, dict):
        if "items" in obj:
            return "batch_request"
        if "results" in obj:
            return "batch_response"
        if "error" in obj:
            return "error"
        if "score" in obj:
            return "score_response"
    return "score_request"


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
            _check_version(obj, "$", required=False)
    except ProtocolError as exc:
        issues = exc.issues
    if kind not in requests:  # a response: its version (above) and every schema issue besides
        try:
            MESSAGES[kind].model_validate(obj)
        except ValidationError as exc:
            issues += issues_from_pydantic(exc)
    return kind, issues


def is_finite_scalar(value: Any) -> bool:
    """True for str, bool, int, None and finite floats: what a flat response may hold."""
    return value is None or isinstance(value, (str, bool, int)) or (isinstance(value, float) and math.isfinite(value))


REFERENCE_FIELD = "speaker_reference_audio_base64"


def _speaker_reference(req: ScoreRequest | BatchItem, limits: Limits, path: str) -> DecodedAudio | None:
    """The inline reference recording, bounded like the item's own audio (``max_audio_seconds``, bytes)."""
    text = req.speaker_reference_audio_base64
    if text is None:
        return None
    fpath = f"{path}.{REFERENCE_FIELD}"
    if req.speaker_reference_id is not None:
        raise ProtocolError.single(
            "invalid_speaker_reference",
            f"send either speaker_reference_id or {REFERENCE_FIELD}, not both", fpath,
        )
    try:
        raw = codecs.b64decode(text, field=REFERENCE_FIELD)
        header = _file_header(raw, REFERENCE_FIELD, limits, fpath, "the reference's")
    except codecs.AudioDecodeError as exc:
        raise ProtocolError.single(exc.code, str(exc), fpath) from None
    waveform = _decode_samples(_Audio(REFERENCE_FIELD, raw, header.sample_rate, header), limits, path, None)
    if waveform.shape[0] == 0:
        raise ProtocolError.single("empty_audio", f"{REFERENCE_FIELD} holds no samples", fpath)
    if not np.isfinite(waveform).all():
        raise ProtocolError.single("non_finite_audio", f"{REFERENCE_FIELD} holds NaN or infinite samples", fpath)
    return DecodedAudio(waveform, header.sample_rate, REFERENCE_FIELD)


def decode_speaker_request(obj: Any, limits: Limits = DEFAULT_LIMITS) -> DecodedAudio:
    """Validate a ``POST /v1/speakers`` body (a parsed JSON object) and decode its recording.

    The recording takes the same encodings, checks and limits as a score request's audio.
    """
    if not isinstance(obj, dict):
        raise ProtocolError.single("invalid_request", "a speaker registration must be a JSON object", "$")
    _check_version(obj, "$")
    try:
        req = SpeakerRequest.model_validate(obj)
    except ValidationError as exc:
        raise ProtocolError(issues_from_pydantic(exc)) from None
    audio = _read_audio(req, limits, "$")
    return DecodedAudio(_samples(req, audio, limits, "$"), audio.rate, audio.name)
