"""Property-based fuzzing of the protocol decoder.

Three properties, each bounded by ``AUDIO_REWARD_TEST_FUZZ_EXAMPLES`` examples
(default 200; the reliability report raises it):

- arbitrary bytes and arbitrary JSON never make the decoder raise anything
  but :class:`ProtocolError` (``validate_message`` never raises at all);
- a valid request with one or more mutations applied either decodes or fails
  with a :class:`ProtocolError` whose code is a documented one;
- every valid generated request decodes, after a trip through JSON bytes,
  to bit-exactly the audio that was encoded.
"""

from __future__ import annotations

import base64
import io
import json
import math
from typing import Any

import numpy as np
import orjson
import pytest
import soundfile as sf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audio_reward.protocol import (
    Limits,
    ProtocolError,
    decode_batch_request,
    decode_score_request,
    encode_f32,
    parse_json,
    validate_message,
)

from .budget import FUZZ_EXAMPLES

FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=False,
)

# Every code docs/protocol.md documents for requests, plus the generic shape error.
DOCUMENTED_CODES = {
    "malformed_json", "unsupported_protocol_version", "unknown_field", "missing_field", "invalid_sample_rate",
    "invalid_metadata", "invalid_prompt", "invalid_reward_options", "invalid_audio_encoding", "invalid_base64",
    "invalid_audio_length", "invalid_audio_file", "num_samples_mismatch", "empty_audio", "non_finite_audio",
    "audio_too_long", "batch_too_large", "invalid_request", "invalid_num_samples",
    "prompt_too_long", "metadata_too_large", "audio_too_large",
}

# A small limit keeps generated audio short; the decoder treats every limit alike.
LIMITS = Limits(max_audio_seconds=2.0, max_batch_items=8)

scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.text(max_size=12), children, max_size=5),
    ),
    max_leaves=25,
)
FIELD_NAMES = [
    "protocol_version", "waveform_f32_base64", "waveform_pcm16_base64", "audio_file_base64", "num_samples",
    "sample_rate", "prompt", "metadata", "language", "request_id", "reward", "reference_duration_s",
    "items", "audio_path", "url",
]
request_like = st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8), json_values, max_size=8)


def _check_decoders(obj: Any) -> None:
    for decode in (lambda o: decode_score_request(o, LIMITS), lambda o: decode_batch_request(o, LIMITS)):
        try:
            decode(obj)
        except ProtocolError as exc:
            assert exc.code in DOCUMENTED_CODES, exc.code
            assert all(issue.path.startswith("$") for issue in exc.issues)
    for kind in (None, "score_request", "batch_request", "score_response", "error", "batch_response"):
        _, issues = validate_message(obj, kind, LIMITS)  # type: ignore[arg-type]
        assert isinstance(issues, list)


def _json_bytes(obj: Any) -> bytes:
    # json.dumps writes NaN/Infinity literals the way Python trainers do; the decoder must name them.
    return json.dumps(obj, allow_nan=True).encode("utf-8")


@FUZZ
@given(st.binary(max_size=512))
def test_arbitrary_bytes_only_raise_protocol_error(body: bytes) -> None:
    try:
        obj = parse_json(body)
    except ProtocolError as exc:
        assert exc.code == "malformed_json"
        return
    _check_decoders(obj)


@FUZZ
@given(json_values)
def test_arbitrary_json_only_raises_protocol_error(obj: Any) -> None:
    _check_decoders(parse_json(_json_bytes(obj)))


@FUZZ
@given(request_like)
def test_request_shaped_json_only_raises_protocol_error(obj: dict[str, Any]) -> None:
    _check_decoders(parse_json(_json_bytes(obj)))
    _check_decoders({"protocol_version": "1", "items": [obj, {**obj, "protocol_version": "1"}]})


def _valid_request(n: int = 160, rate: int = 16_000) -> dict[str, Any]:
    wave = (np.sin(np.arange(n, dtype=np.float32) / 7) * 0.3).astype(np.float32)
    return {
        "protocol_version": "1", "waveform_f32_base64": encode_f32(wave), "num_samples": n,
        "sample_rate": rate, "prompt": "hello world", "metadata": {"index": 1, "split": "train"},
        "request_id": "r-1",
    }


def _mutate_string(text: str, data: st.DataObject) -> str:
    how = data.draw(st.sampled_from(["truncate", "flip", "insert", "pad", "empty"]))
    if how == "truncate" and text:
        return text[: data.draw(st.integers(0, len(text) - 1))]
    if how == "flip" and text:
        i = data.draw(st.integers(0, len(text) - 1))
        return text[:i] + data.draw(st.characters()) + text[i + 1:]
    if how == "insert":
        i = data.draw(st.integers(0, len(text)))
        return text[:i] + data.draw(st.text(min_size=1, max_size=4)) + text[i:]
    if how == "pad":
        return text + "=" * data.draw(st.integers(1, 3))
    return ""


@FUZZ
@given(st.data())
def test_mutated_valid_requests_decode_or_fail_cleanly(data: st.DataObject) -> None:
    obj = _valid_request()
    for _ in range(data.draw(st.integers(1, 4))):
        key = data.draw(st.sampled_from(FIELD_NAMES))
        action = data.draw(st.sampled_from(["delete", "replace", "mutate"]))
        if action == "delete":
            obj.pop(key, None)
        elif action == "replace":
            obj[key] = data.draw(json_values)
        elif isinstance(obj.get(key), str):
            obj[key] = _mutate_string(obj[key], data)
        elif isinstance(obj.get(key), int) and not isinstance(obj.get(key), bool):
            obj[key] = obj[key] + data.draw(st.sampled_from([-1, 1, -(2**40), 2**64, 10**6]))
    body = _json_bytes(obj)
    _check_decoders(parse_json(body))
    # The same payload as a batch item must fail only its own slot.
    try:
        _, items = decode_batch_request({"protocol_version": "1", "items": [obj, _valid_request()]}, LIMITS)
    except ProtocolError as exc:  # only an envelope problem may fail the whole batch
        assert exc.code in DOCUMENTED_CODES
    else:
        assert not isinstance(items[1], ProtocolError)


finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
rates = st.integers(min_value=1_000, max_value=192_000)


@FUZZ
@given(st.lists(finite_f32, min_size=1, max_size=2000), rates, st.text(max_size=60),
       st.dictionaries(st.text(max_size=10), st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53),
                                                       st.floats(allow_nan=False, allow_infinity=False),
                                                       st.text(max_size=20)), max_size=4))
def test_valid_f32_requests_decode_bit_exact(samples: list[float], rate: int, prompt: str, metadata: dict) -> None:
    wave = np.asarray(samples, dtype=np.float32)
    if wave.shape[0] / rate > LIMITS.max_audio_seconds:
        return
    body = orjson.dumps({
        "protocol_version": "1", "waveform_f32_base64": encode_f32(wave), "num_samples": int(wave.shape[0]),
        "sample_rate": rate, "prompt": prompt, "metadata": metadata,
    })
    req = decode_score_request(parse_json(body), LIMITS)
    assert req.waveform.dtype == np.float32
    assert req.waveform.tobytes() == wave.tobytes()
    assert req.sample_rate == rate and req.prompt == prompt
    assert req.metadata == metadata


@FUZZ
@given(st.lists(st.integers(-32768, 32767), min_size=1, max_size=2000), rates)
def test_valid_pcm16_requests_decode_exact(values: list[int], rate: int) -> None:
    pcm = np.asarray(values, dtype="<i2")
    if pcm.shape[0] / rate > LIMITS.max_audio_seconds:
        return
    body = orjson.dumps({
        "protocol_version": "1", "waveform_pcm16_base64": base64.b64encode(pcm.tobytes()).decode(),
        "num_samples": int(pcm.shape[0]), "sample_rate": rate, "prompt": "x",
    })
    req = decode_score_request(parse_json(body), LIMITS)
    assert np.array_equal(req.waveform, pcm.astype(np.float32) / np.float32(32768.0))


@FUZZ
@given(st.lists(st.floats(-1.0, 1.0, width=32), min_size=1, max_size=2000),
       st.sampled_from([8_000, 16_000, 22_050, 24_000, 44_100, 48_000]))
def test_valid_wav_file_requests_decode_bit_exact(samples: list[float], rate: int) -> None:
    wave = np.asarray(samples, dtype=np.float32)
    buf = io.BytesIO()
    sf.write(buf, wave, rate, format="WAV", subtype="FLOAT")
    obj = {"protocol_version": "1", "audio_file_base64": base64.b64encode(buf.getvalue()).decode(), "prompt": "x"}
    req = decode_score_request(parse_json(orjson.dumps(obj)), LIMITS)
    assert req.sample_rate == rate
    assert req.waveform.tobytes() == wave.tobytes()


@FUZZ
@given(st.lists(st.lists(finite_f32, min_size=1, max_size=200), min_size=1, max_size=LIMITS.max_batch_items))
def test_valid_batches_decode_every_item_bit_exact(waves: list[list[float]]) -> None:
    arrays = [np.asarray(w, dtype=np.float32) for w in waves]
    obj = {"protocol_version": "1", "items": [
        {"waveform_f32_base64": encode_f32(a), "num_samples": int(a.shape[0]), "sample_rate": 16_000,
         "prompt": f"item {i}", "request_id": f"b-{i}"} for i, a in enumerate(arrays)
    ]}
    version, items = decode_batch_request(parse_json(orjson.dumps(obj)), LIMITS)
    assert version == "1" and len(items) == len(arrays)
    for i, (item, a) in enumerate(zip(items, arrays, strict=True)):
        assert not isinstance(item, ProtocolError)
        assert item.waveform.tobytes() == a.tobytes() and item.request_id == f"b-{i}"


@pytest.mark.parametrize("depth", [10, 100, 1_000, 10_000, 100_000])
def test_deep_nesting_is_a_protocol_error(depth: int) -> None:
    for body in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
        try:
            obj = parse_json(body)
        except ProtocolError as exc:
            assert exc.code == "malformed_json"
            continue
        _check_decoders(obj)
        _check_decoders({**_valid_request(), "metadata": {"deep": obj}})


def test_non_finite_literals_are_named() -> None:
    for literal in ("NaN", "Infinity", "-Infinity"):
        body = _json_bytes(_valid_request()).replace(b'"index": 1', f'"index": {literal}'.encode())
        with pytest.raises(ProtocolError) as err:
            decode_score_request(parse_json(body), LIMITS)
        assert err.value.code == "invalid_metadata" and "$.metadata.index" in str(err.value)
    assert math.isnan(parse_json(b"NaN"))


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "\\ud83d"])
def test_lone_surrogate_prompt_is_invalid_prompt(escape: str) -> None:
    body = _json_bytes(_valid_request()).replace(b'"hello world"', f'"a{escape}b"'.encode())
    with pytest.raises(ProtocolError) as err:
        decode_score_request(parse_json(body), LIMITS)
    assert err.value.code == "invalid_prompt" and "$.prompt" in str(err.value)
