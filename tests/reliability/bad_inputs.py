"""The bad-input battery: raw HTTP payloads a scorer server must refuse cleanly.

Each :class:`BadInput` is sent as-is over a fresh loopback connection
(``http.client``, so the bytes, headers and framing are exactly what the case
says). What a case accepts is in ``expect``: a set of HTTP statuses, and for a
4xx optionally the protocol error code. A 5xx is never accepted; every 4xx
must carry the protocol's error shape with ``retryable: false``; a 200 must be
a valid score (or batch) response. :func:`run_battery` checks all of that
and, after each case, that a valid request still gets a score.

The payloads are built by :func:`build_cases` for a given body limit, so an
"oversized" body is always just over it and an "hours of audio" body just
under it.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import io
import json
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import soundfile as sf

from audio_reward.protocol import (
    ErrorResponse,
    encode_f32,
    encode_pcm16,
    validate_message,
)
from tests.testkit.speech import tone

JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class BadInput:
    """One raw request of the battery and the answers it may get."""

    name: str
    group: str
    body: bytes | Callable[[], Iterable[bytes]]
    expect: frozenset[int]
    code: str | None = None
    path: str = "/v1/score"
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=lambda: dict(JSON))


@dataclass
class Outcome:
    """What the server answered to one case, and whether that was acceptable."""

    case: BadInput
    status: int
    code: str | None
    seconds: float
    problems: list[str]
    valid_after: bool

    @property
    def ok(self) -> bool:
        return not self.problems and self.valid_after


def valid_request(**patch: Any) -> dict[str, Any]:
    wave = tone()
    req: dict[str, Any] = {
        "protocol_version": "1", "waveform_f32_base64": encode_f32(wave), "num_samples": int(wave.shape[0]),
        "sample_rate": 16_000, "prompt": "hello world", "metadata": {"index": 0, "split": "train"},
    }
    req.update(patch)
    return {k: v for k, v in req.items() if v is not _DROP}


_DROP = object()
"""A ``valid_request`` patch value that removes the field."""


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, allow_nan=True, ensure_ascii=True).encode()


def _wav_header_claiming(frames: int, rate: int = 16_000) -> bytes:
    """A WAV header announcing ``frames`` float32 samples, followed by only a few."""
    data_bytes = frames * 4
    header = b"RIFF" + struct.pack("<I", min(36 + data_bytes, 2**32 - 1)) + b"WAVE"
    header += b"fmt " + struct.pack("<IHHIIHH", 16, 3, 1, rate, rate * 4, 4, 32)
    header += b"data" + struct.pack("<I", min(data_bytes, 2**32 - 1))
    return header + np.zeros(64, np.float32).tobytes()


def _silent_flac(seconds: int, rate: int) -> str:
    """A FLAC file of silence: hours of audio in a few hundred kilobytes."""
    buf = io.BytesIO()
    block = np.zeros(rate * 60, np.int16)
    with sf.SoundFile(buf, "w", samplerate=rate, channels=1, format="FLAC", subtype="PCM_16") as f:
        for _ in range(seconds // 60):
            f.write(block)
    return base64.b64encode(buf.getvalue()).decode()


def _audio_file(wave: np.ndarray, rate: int, fmt: str, subtype: str) -> str:
    buf = io.BytesIO()
    sf.write(buf, wave, rate, format=fmt, subtype=subtype)
    return base64.b64encode(buf.getvalue()).decode()


def build_cases(max_body_bytes: int, max_audio_seconds: float = 60.0, max_batch_items: int = 256) -> list[BadInput]:
    """Every case of the battery, sized for a server with these limits."""
    c: list[BadInput] = []

    def add(name: str, group: str, body: Any, expect: Iterable[int], code: str | None = None, **kw: Any) -> None:
        raw = body if isinstance(body, bytes) or callable(body) else _dumps(body)
        c.append(BadInput(name, group, raw, frozenset(expect), code, **kw))

    bad = {400, 422}
    wave = tone()
    f32 = encode_f32(wave)

    # -- malformed JSON
    add("empty body", "json", b"", bad, "malformed_json")
    add("truncated object", "json", _dumps(valid_request())[:-40], bad, "malformed_json")
    add("plain text", "json", b"score this please", bad, "malformed_json")
    add("trailing garbage", "json", _dumps(valid_request()) + b" trailing", bad, "malformed_json")
    add("single-quoted JSON", "json", b"{'protocol_version': '1'}", bad, "malformed_json")
    add("top-level array", "json", b"[]", bad, "invalid_request")
    add("top-level string", "json", b'"hello"', bad, "invalid_request")
    add("top-level null", "json", b"null", bad, "invalid_request")
    add("top-level number", "json", b"42", bad, "invalid_request")
    add(
        "invalid UTF-8 bytes",
        "json",
        _dumps(valid_request(prompt="PLACEHOLDER")).replace(b"PLACEHOLDER", b"\xff\xfe\xc3("),
        bad,
        "malformed_json",
    )
    # RFC 8259 asks for UTF-8, but Python's parser detects UTF-16/32: either a score or a clean refusal.
    add("UTF-16 body", "json", json.dumps(valid_request()).encode("utf-16"), bad | {200})
    add("NUL byte in body", "json", b"{\x00}", bad, "malformed_json")

    # -- wrong types
    add("protocol_version as int", "types", valid_request(protocol_version=1), bad, "unsupported_protocol_version")
    add("protocol_version 2", "types", valid_request(protocol_version="2"), bad, "unsupported_protocol_version")
    add("protocol_version empty", "types", valid_request(protocol_version=""), bad, "unsupported_protocol_version")
    add("protocol_version missing", "types", valid_request(protocol_version=_DROP), bad, "missing_field")
    add("sample_rate as string", "types", valid_request(sample_rate="16000"), bad, "invalid_sample_rate")
    add("sample_rate as float", "types", valid_request(sample_rate=16000.0), bad, "invalid_sample_rate")
    add("sample_rate as bool", "types", valid_request(sample_rate=True), bad, "invalid_sample_rate")
    add("prompt null", "types", valid_request(prompt=None), bad, "invalid_prompt")
    add("prompt number", "types", valid_request(prompt=12), bad, "invalid_prompt")
    add("prompt missing", "types", valid_request(prompt=_DROP), bad, "missing_field")
    add("metadata list", "types", valid_request(metadata=[1, 2]), bad, "invalid_metadata")
    add("metadata string", "types", valid_request(metadata="x"), bad, "invalid_metadata")
    add("num_samples string", "types", valid_request(num_samples="8000"), bad, "invalid_num_samples")
    add("waveform as a JSON list", "types", valid_request(waveform_f32_base64=wave[:10].tolist()), bad)
    add("request_id number", "types", valid_request(request_id=7), bad)
    add("reward as string", "types", valid_request(reward="exp"), bad, "invalid_reward_options")
    add("reward unknown formula", "types", valid_request(reward={"formula": "cubic"}), bad, "invalid_reward_options")
    add("reward unknown option", "types", valid_request(reward={"bonus": 1}), bad)
    add("language one char", "types", valid_request(language="e"), bad)
    add("request_id 129 chars", "types", valid_request(request_id="r" * 129), bad)

    # -- huge numbers
    add(
        "sample_rate 1e30",
        "numbers",
        _dumps(valid_request(sample_rate=7)).replace(
            b'"sample_rate": 7', b'"sample_rate": 1000000000000000000000000000000'
        ),
        bad,
        "invalid_sample_rate",
    )
    add(
        "num_samples 10^400",
        "numbers",
        _dumps(valid_request(num_samples=7)).replace(b'"num_samples": 7', b'"num_samples": 1' + b"0" * 400),
        bad,
        "num_samples_mismatch",
    )
    add(
        "metadata 1e999",
        "numbers",
        _dumps(valid_request(metadata={"x": 7})).replace(b'"x": 7', b'"x": 1e999'),
        bad,
        "invalid_metadata",
    )
    add(
        "exp_k 1e308",
        "numbers",
        valid_request(reward={"formula": "exp", "exp_k": 1e308}),
        bad,
        "invalid_reward_options",
    )
    add("num_samples negative", "numbers", valid_request(num_samples=-1), bad)

    # -- NaN / Infinity literals
    add("metadata NaN", "nonfinite", valid_request(metadata={"x": float("nan")}), bad, "invalid_metadata")
    add("metadata Infinity", "nonfinite", valid_request(metadata={"x": float("inf")}), bad, "invalid_metadata")
    add("metadata -Infinity", "nonfinite", valid_request(metadata={"x": float("-inf")}), bad, "invalid_metadata")
    add("reference_duration_s NaN", "nonfinite", valid_request(reference_duration_s=float("nan")), bad)
    add(
        "reward exp_k Infinity",
        "nonfinite",
        valid_request(reward={"exp_k": float("inf")}),
        bad,
        "invalid_reward_options",
    )
    add(
        "NaN samples",
        "nonfinite",
        valid_request(waveform_f32_base64=encode_f32(np.full(800, np.nan, np.float32)), num_samples=800),
        bad,
        "non_finite_audio",
    )
    add(
        "Inf samples",
        "nonfinite",
        valid_request(waveform_f32_base64=encode_f32(np.full(800, np.inf, np.float32)), num_samples=800),
        bad,
        "non_finite_audio",
    )

    # -- base64 and lengths
    add("truncated base64", "audio", valid_request(waveform_f32_base64=f32[:-3]), bad, "invalid_base64")
    add("base64 bad characters", "audio", valid_request(waveform_f32_base64="!!!!" + f32[4:]), bad, "invalid_base64")
    add(
        "base64 with newlines",
        "audio",
        valid_request(waveform_f32_base64=f32[:76] + "\n" + f32[76:]),
        bad,
        "invalid_base64",
    )
    add(
        "url-safe base64 alphabet",
        "audio",
        valid_request(waveform_f32_base64=f32.replace("+", "-").replace("/", "_")),
        bad,
        "invalid_base64",
    )
    add(
        "partial float32 sample",
        "audio",
        valid_request(waveform_f32_base64=base64.b64encode(b"\0" * 6).decode(), num_samples=1),
        bad,
        "invalid_audio_length",
    )
    add("empty waveform", "audio", valid_request(waveform_f32_base64="", num_samples=0), bad, "empty_audio")
    add(
        "num_samples too large", "audio", valid_request(num_samples=int(wave.shape[0]) + 1), bad, "num_samples_mismatch"
    )
    add("num_samples too small", "audio", valid_request(num_samples=1), bad, "num_samples_mismatch")
    add("no audio encoding", "audio", valid_request(waveform_f32_base64=_DROP), bad, "invalid_audio_encoding")
    add(
        "two audio encodings",
        "audio",
        valid_request(waveform_pcm16_base64=encode_pcm16(wave)),
        bad,
        "invalid_audio_encoding",
    )
    add(
        "audio file of garbage",
        "audio",
        valid_request(
            waveform_f32_base64=_DROP,
            num_samples=_DROP,
            sample_rate=_DROP,
            audio_file_base64=base64.b64encode(b"RIFF" + b"\x01" * 200).decode(),
        ),
        bad,
        "invalid_audio_file",
    )
    add(
        "audio file with sample_rate",
        "audio",
        valid_request(
            waveform_f32_base64=_DROP, num_samples=_DROP, audio_file_base64=_audio_file(wave, 16_000, "WAV", "FLOAT")
        ),
        bad,
        "invalid_sample_rate",
    )
    add(  # every format the transcription endpoint takes is scored too (docs/protocol.md)
        "OGG file",
        "audio",
        valid_request(
            waveform_f32_base64=_DROP,
            num_samples=_DROP,
            sample_rate=_DROP,
            audio_file_base64=_audio_file(wave, 16_000, "OGG", "VORBIS"),
        ),
        {200},
    )

    # -- sample rates
    add("sample_rate 0 Hz", "rate", valid_request(sample_rate=0), bad, "invalid_sample_rate")
    add("sample_rate 10 MHz", "rate", valid_request(sample_rate=10_000_000), bad, "invalid_sample_rate")
    add("sample_rate negative", "rate", valid_request(sample_rate=-16_000), bad, "invalid_sample_rate")
    add("sample_rate 999 Hz", "rate", valid_request(sample_rate=999), bad, "invalid_sample_rate")
    add(
        "WAV file at 1 Hz",
        "rate",
        valid_request(
            waveform_f32_base64=_DROP,
            num_samples=_DROP,
            sample_rate=_DROP,
            audio_file_base64=_audio_file(wave[:10], 1, "WAV", "FLOAT"),
        ),
        bad,
        "invalid_sample_rate",
    )

    # -- long audio: just over the duration limit, and hours of it within the body limit
    over = int((max_audio_seconds + 1) * 1_000)
    add(
        "audio just over the limit",
        "long",
        valid_request(
            waveform_pcm16_base64=encode_pcm16(np.zeros(over, np.float32)),
            waveform_f32_base64=_DROP,
            num_samples=over,
            sample_rate=1_000,
        ),
        bad,
        "audio_too_long",
    )
    hour_samples = min(3_600 * 1_000, (max_body_bytes // 2) * 3 // 4 // 2)
    add(
        f"{hour_samples / 1_000 / 60:.0f} minutes of audio",
        "long",
        valid_request(
            waveform_pcm16_base64=base64.b64encode(bytes(2 * hour_samples)).decode(),
            waveform_f32_base64=_DROP,
            num_samples=hour_samples,
            sample_rate=1_000,
        ),
        bad,
        "audio_too_long",
    )
    # libsndfile trusts the data it finds over the header's claim: 64 samples are scored or refused.
    add(
        "WAV header claiming 10 hours",
        "long",
        valid_request(
            waveform_f32_base64=_DROP,
            num_samples=_DROP,
            sample_rate=_DROP,
            audio_file_base64=base64.b64encode(_wav_header_claiming(10 * 3_600 * 16_000)).decode(),
        ),
        bad | {200},
    )
    add(
        "1 hour of silence as a small FLAC",
        "long",
        valid_request(
            waveform_f32_base64=_DROP,
            num_samples=_DROP,
            sample_rate=_DROP,
            audio_file_base64=_silent_flac(3_600, 8_000),
        ),
        bad,
        "audio_too_long",
    )

    # -- nesting and metadata
    add("nested metadata", "nesting", valid_request(metadata={"a": {"b": 1}}), bad, "invalid_metadata")
    deep = 100_000
    add("100k-deep arrays", "nesting", b"[" * deep + b"]" * deep, bad)
    add("100k-deep objects", "nesting", b'{"a":' * deep + b"1" + b"}" * deep, bad)
    add(
        "1k-deep metadata",
        "nesting",
        _dumps(valid_request(metadata={"x": 7})).replace(b'"x": 7', b'"x": ' + b"[" * 1000 + b"]" * 1000),
        bad,
        "invalid_metadata",
    )
    huge_meta = {f"k{i}": i for i in range(100_000)}
    huge_meta["zz"] = {"nested": True}
    add("100k metadata keys, one nested", "nesting", valid_request(metadata=huge_meta), bad, "metadata_too_large")

    # -- Unicode in the prompt and ids: valid text is scored, invalid text refused
    ok_or_bad = bad | {200}
    add("lone surrogate in prompt", "unicode", _dumps(valid_request(prompt="a\ud800b")), bad, "invalid_prompt")
    add("lone surrogate in request_id", "unicode", _dumps(valid_request(request_id="id-\udfff")), bad)
    add("lone surrogate in metadata", "unicode", _dumps(valid_request(metadata={"k\ud83d": "v\udc00"})), ok_or_bad)
    add("RTL prompt", "unicode", valid_request(prompt="\u202eשלום עולם مرحبا"), {200})
    add("zero-width prompt", "unicode", valid_request(prompt="hel\u200blo\u200d wor\ufeffld\u2060"), {200})
    add(
        "combining marks prompt",
        "unicode",
        valid_request(prompt="Z\u0351\u036b\u0343a\u0310\u0312l\u0363go" * 50),
        {200},
    )
    add("1 MB prompt", "unicode", valid_request(prompt="hello world " * 87_382), bad, "prompt_too_long")
    add("NUL in prompt", "unicode", valid_request(prompt="hello\u0000world"), {200} | bad)

    # -- transport: content type, encoding, framing, size
    body = _dumps(valid_request())
    add("text/plain content type", "transport", body, {200, 415}, headers={"Content-Type": "text/plain"})
    add(
        "form content type",
        "transport",
        b"protocol_version=1&prompt=x",
        {400, 415, 422},
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    add("no content type", "transport", body, {200, 415}, headers={})
    add(
        "gzip body",
        "transport",
        gzip.compress(body),
        {200, 400, 415},
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    add(
        "deflate body",
        "transport",
        zlib.compress(body),
        {200, 400, 415},
        headers={"Content-Type": "application/json", "Content-Encoding": "deflate"},
    )
    add(
        "gzip bomb",
        "transport",
        gzip.compress(b" " * (4 * max_body_bytes)),
        {400, 413, 415},
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    add("oversized body", "transport", b" " * (max_body_bytes + 1024), {413})
    add(
        "oversized chunked body",
        "transport",
        lambda: (b" " * 65_536 for _ in range(max_body_bytes // 65_536 + 2)),
        {413},
        headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
    )
    add("GET on the score endpoint", "transport", b"", {405}, method="GET", headers={})
    add("unknown path", "transport", body, {404}, path="/v1/nothing-here")

    # -- batch envelope
    item = valid_request(protocol_version=_DROP)
    add("batch without items", "batch", {"protocol_version": "1"}, bad, path="/v1/score/batch")
    add("batch empty items", "batch", {"protocol_version": "1", "items": []}, bad, path="/v1/score/batch")
    add("batch items not a list", "batch", {"protocol_version": "1", "items": item}, bad, path="/v1/score/batch")
    add(
        "batch too large",
        "batch",
        {"protocol_version": "1", "items": [item] * (max_batch_items + 1)},
        bad,
        "batch_too_large",
        path="/v1/score/batch",
    )
    add(
        "batch unknown envelope field",
        "batch",
        {"protocol_version": "1", "items": [item], "priority": 9},
        bad,
        "unknown_field",
        path="/v1/score/batch",
    )
    add(
        "batch version 9",
        "batch",
        {"protocol_version": "9", "items": [item]},
        bad,
        "unsupported_protocol_version",
        path="/v1/score/batch",
    )
    add(
        "batch with one bad item",
        "batch",
        {"protocol_version": "1", "items": [item, {**item, "sample_rate": 0}]},
        {200},
        path="/v1/score/batch",
    )
    return c


def _send(host: str, port: int, case: BadInput, timeout: float) -> tuple[int, bytes, dict[str, str]]:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        headers = dict(case.headers)
        if callable(case.body):
            conn.putrequest(case.method, case.path, skip_accept_encoding=True)
            for k, v in headers.items():
                conn.putheader(k, v)
            conn.endheaders()
            try:
                for chunk in case.body():
                    conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                conn.send(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may answer 413 and close before the body ends
        else:
            conn.request(case.method, case.path, body=case.body if case.method != "GET" else None, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read(), {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def check_answer(case: BadInput, status: int, body: bytes) -> tuple[str | None, list[str]]:
    """The error code found and every way the answer breaks the case's contract."""
    problems: list[str] = []
    code = None
    if status >= 500:
        problems.append(f"server error {status}")
    if status not in case.expect:
        problems.append(f"status {status} not in {sorted(case.expect)}")
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        problems.append(f"body is not JSON: {body[:120]!r}")
        return code, problems
    if status == 200:
        kind = "batch_response" if case.path.endswith("/batch") else "score_response"
        _, issues = validate_message(obj, kind)  # type: ignore[arg-type]
        problems += [f"invalid {kind}: {i.describe()}" for i in issues]
        return code, problems
    try:
        err = ErrorResponse.model_validate(obj).error
    except Exception as exc:  # noqa: BLE001 - any pydantic failure means the shape is wrong
        problems.append(f"not the protocol error shape: {exc}")
        return code, problems
    code = err.code
    if err.retryable:
        problems.append("a final 4xx marked retryable")
    if case.code is not None and status in (400, 422) and err.code != case.code:
        problems.append(f"code {err.code!r}, expected {case.code!r}")
    return code, problems


def run_battery(
    host: str,
    port: int,
    cases: list[BadInput],
    *,
    timeout: float = 60.0,
    headers: Mapping[str, str] | None = None,
    probe: bool = True,
    on_case: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Send every case, each followed (with ``probe``) by a valid request; return what happened to each.

    ``headers`` (an API key) go with the probes; the cases carry their own.
    """
    valid = BadInput("valid", "probe", _dumps(valid_request()), frozenset({200}), headers={**JSON, **(headers or {})})
    out = []
    for case in cases:
        t0 = time.perf_counter()
        try:
            status, body, _ = _send(host, port, case, timeout)
            code, problems = check_answer(case, status, body)
        except (OSError, http.client.HTTPException) as exc:
            status, code, problems = 0, None, [f"transport failure: {exc!r}"]
        seconds = time.perf_counter() - t0
        valid_after = True
        if probe:
            try:
                pstatus, pbody, _ = _send(host, port, valid, timeout)
                valid_after = pstatus == 200 and not check_answer(valid, pstatus, pbody)[1]
            except (OSError, http.client.HTTPException):
                valid_after = False
        outcome = Outcome(case, status, code, seconds, problems, valid_after)
        out.append(outcome)
        if on_case:
            on_case(outcome)
    return out
