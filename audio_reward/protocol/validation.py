"""Validation and decoding of protocol messages.

``decode_score_request`` is what a server calls: it checks the version, the
shape (pydantic) and the audio (base64, lengths, finiteness, limits) and
returns a :class:`DecodedScoreRequest` holding a float32 waveform, or raises
:class:`ProtocolError` naming every field at fault.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import orjson
from pydantic import BaseModel, ValidationError

from . import codecs
from .errors import Issue, ProtocolError
from .models import (
    MAX_SAMPLE_RATE,
    MESSAGES,
    MIN_SAMPLE_RATE,
    BatchItem,
    RewardOptions,
    ScoreRequest,
)
from .version import SUPPORTED_VERSIONS, is_supported

MessageKind = Literal["score_request", "score_response", "error", "batch_request", "batch_response"]

AUDIO_FIELDS = ("waveform_f32_base64", "waveform_pcm16_base64", "audio_file_base64")


@dataclass(frozen=True)
class Limits:
    """Bounds a receiver enforces on top of the schema."""

    max_audio_seconds: float = 60.0
    max_batch_items: int = 256


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class DecodedScoreRequest:
    """A validated request with its audio decoded to mono float32."""

    waveform: np.ndarray
    sample_rate: int
    prompt: str
    protocol_version: str
    encoding: str
    metadata: dict[str, Any] = field(default_factory=dict)
    language: str | None = None
    request_id: str | None = None
    reward: RewardOptions | None = None
    reference_duration_s: float | None = None

    @property
    def duration_s(self) -> float:
        return self.waveform.shape[0] / self.sample_rate


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
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


_CODE_BY_FIELD = {
    "sample_rate": "invalid_sample_rate",
    "metadata": "invalid_metadata",
    "prompt": "invalid_prompt",
    "num_samples": "invalid_num_samples",
    "reward": "invalid_reward_options",
    "protocol_version": "unsupported_protocol_version",
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
        elif err["type"] == "missing":
            code, msg = "missing_field", f"required field {loc[-1]!r} is missing"
        else:
            code = _CODE_BY_FIELD.get(top or "", "invalid_request")
            msg = err["msg"].removeprefix("Value error, ")
            if top in _HINT_BY_FIELD:
                msg = f"{msg} ({_HINT_BY_FIELD[top]})"
        issues.append(Issue(code, msg, _path(loc, prefix)))
    return issues


def _version_issue(obj: dict[str, Any], path: str, *, required: bool = True) -> Issue | None:
    version = obj.get("protocol_version")
    if version is None and not required:
        return None
    if "protocol_version" not in obj:
        return Issue(
            "missing_field",
            f"required field 'protocol_version' is missing; send \"protocol_version\": \"{SUPPORTED_VERSIONS[-1]}\"",
            f"{path}.protocol_version",
        )
    if not is_supported(version):
        return Issue(
            "unsupported_protocol_version",
            f"protocol_version {version!r} is not supported; supported: {', '.join(SUPPORTED_VERSIONS)}",
            f"{path}.protocol_version",
        )
    return None


def _decode_audio(req: ScoreRequest | BatchItem, limits: Limits, path: str) -> tuple[np.ndarray, int, str]:
    present = [name for name in AUDIO_FIELDS if getattr(req, name) is not None]
    if len(present) != 1:
        if present:
            message = f"exactly one audio encoding is allowed, found {len(present)}: {', '.join(present)}"
        else:
            message = f"the audio is missing: send one of {', '.join(AUDIO_FIELDS)}"
        raise ProtocolError.single("invalid_audio_encoding", message, path)
    name = present[0]
    fpath = f"{path}.{name}"
    try:
        if name == "audio_file_base64":
            if req.sample_rate is not None:
                raise ProtocolError.single(
                    "invalid_sample_rate", "sample_rate must be omitted with audio_file_base64 (the file header gives it)",
                    f"{path}.sample_rate",
                )
            waveform, rate = codecs.decode_file(req.audio_file_base64 or "", max_seconds=limits.max_audio_seconds)
            if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
                raise ProtocolError.single(
                    "invalid_sample_rate", f"the file's sample rate {rate} Hz is outside {MIN_SAMPLE_RATE}–{MAX_SAMPLE_RATE} Hz", fpath
                )
        else:
            if req.sample_rate is None:
                raise ProtocolError.single(
                    "missing_field", f"sample_rate is required with {name}", f"{path}.sample_rate"
                )
            rate = req.sample_rate
            text = getattr(req, name)
            # Reject an oversized payload from its base64 length, before decoding it.
            width = 4 if name == "waveform_f32_base64" else 2
            approx_samples = len(text) * 3 // 4 // width
            if approx_samples / rate > limits.max_audio_seconds + 1:
                raise ProtocolError.single(
                    "audio_too_long",
                    f"{name} holds about {approx_samples / rate:.1f} s of audio; the limit is {limits.max_audio_seconds:g} s",
                    fpath,
                )
            waveform = codecs.decode_f32(text) if width == 4 else codecs.decode_pcm16(text)
    except codecs.AudioDecodeError as exc:
        raise ProtocolError.single(exc.code, str(exc), fpath) from None
    return waveform, rate, name


def _check_samples(req: ScoreRequest | BatchItem, waveform: np.ndarray, rate: int, name: str,
                   limits: Limits, path: str) -> list[Issue]:
    issues = []
    n = int(waveform.shape[0])
    if req.num_samples is not None and req.num_samples != n:
        issues.append(Issue("num_samples_mismatch",
                            f"num_samples is {req.num_samples} but {name} holds {n} samples", f"{path}.num_samples"))
    if n == 0:
        issues.append(Issue("empty_audio", f"{name} holds no samples", f"{path}.{name}"))
    elif not np.isfinite(waveform).all():
        bad = int(np.count_nonzero(~np.isfinite(waveform)))
        issues.append(Issue("non_finite_audio", f"{name} holds {bad} NaN or infinite samples", f"{path}.{name}"))
    if n / rate > limits.max_audio_seconds:
        issues.append(Issue("audio_too_long",
                            f"{name} holds {n / rate:.2f} s of audio; the limit is {limits.max_audio_seconds:g} s",
                            f"{path}.{name}"))
    return issues


def decode_score_request(
    obj: Any,
    limits: Limits = DEFAULT_LIMITS,
    *,
    path: str = "$",
    batch_version: str | None = None,
) -> DecodedScoreRequest:
    """Validate one score request (a parsed JSON object) and decode its audio.

    Inside a batch pass ``batch_version``: the item's own version may be
    omitted and then takes the batch's.
    """
    if not isinstance(obj, dict):
        raise ProtocolError.single("invalid_request", f"a score request must be a JSON object, got {type(obj).__name__}", path)
    issue = _version_issue(obj, path, required=batch_version is None)
    if issue:
        raise ProtocolError([issue])
    model = BatchItem if batch_version is not None else ScoreRequest
    try:
        req = model.model_validate(obj)
    except ValidationError as exc:
        raise ProtocolError(issues_from_pydantic(exc, path)) from None
    waveform, rate, name = _decode_audio(req, limits, path)
    issues = _check_samples(req, waveform, rate, name, limits, path)
    if issues:
        raise ProtocolError(issues)
    return DecodedScoreRequest(
        waveform=waveform,
        sample_rate=rate,
        prompt=req.prompt,
        protocol_version=req.protocol_version or batch_version or "1",
        encoding=name,
        metadata=dict(req.metadata),
        language=req.language,
        request_id=req.request_id,
        reward=req.reward,
        reference_duration_s=req.reference_duration_s,
    )


def decode_batch_request(
    obj: Any, limits: Limits = DEFAULT_LIMITS
) -> tuple[str, list[DecodedScoreRequest | ProtocolError]]:
    """Validate a batch envelope; each item decodes on its own.

    The envelope failing raises; an item failing becomes that item's
    :class:`ProtocolError` in the returned list, in request order.
    """
    if not isinstance(obj, dict):
        raise ProtocolError.single("invalid_request", "a batch request must be a JSON object", "$")
    issue = _version_issue(obj, "$")
    if issue:
        raise ProtocolError([issue])
    unknown = sorted(set(obj) - {"protocol_version", "items"})
    if unknown:
        raise ProtocolError([Issue("unknown_field", f"unknown field {k!r}", f"$.{k}") for k in unknown])
    items = obj.get("items")
    if not isinstance(items, list) or not items:
        raise ProtocolError.single("invalid_request", "items must be a non-empty array of score requests", "$.items")
    if len(items) > limits.max_batch_items:
        raise ProtocolError.single(
            "batch_too_large", f"items holds {len(items)} requests; the limit is {limits.max_batch_items}", "$.items"
        )
    version = obj["protocol_version"]
    out: list[DecodedScoreRequest | ProtocolError] = []
    for i, item in enumerate(items):
        try:
            out.append(decode_score_request(item, limits, path=f"$.items[{i}]", batch_version=version))
        except ProtocolError as exc:
            out.append(exc)
    return version, out


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


def _model_issues(model: type[BaseModel], obj: Any) -> list[Issue]:
    try:
        model.model_validate(obj)
    except ValidationError as exc:
        return issues_from_pydantic(exc)
    return []


def validate_message(obj: Any, kind: MessageKind | None = None, limits: Limits = DEFAULT_LIMITS) -> tuple[MessageKind, list[Issue]]:
    """Every issue of a parsed message; an empty list means valid.

    Requests get the full audio checks; responses the schema and flatness checks.
    """
    kind = kind or detect_kind(obj)
    if kind == "score_request":
        try:
            decode_score_request(obj, limits)
        except ProtocolError as exc:
            return kind, exc.issues
        return kind, []
    if kind == "batch_request":
        try:
            _, items = decode_batch_request(obj, limits)
        except ProtocolError as exc:
            return kind, exc.issues
        return kind, [issue for item in items if isinstance(item, ProtocolError) for issue in item.issues]
    issues = []
    if isinstance(obj, dict) and kind == "batch_response" and obj.get("protocol_version") is not None:
        issue = _version_issue(obj, "$")
        issues += [issue] if issue else []
    return kind, issues + _model_issues(MESSAGES[kind], obj)


def is_finite_scalar(value: Any) -> bool:
    """True for str, bool, int, None and finite floats: what a flat response may hold."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (str, bool, int))
