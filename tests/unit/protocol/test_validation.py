from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from audio_reward.protocol import (
    DEFAULT_LIMITS,
    Limits,
    ProtocolError,
    decode_batch_request,
    decode_score_request,
    encode_pcm16,
    parse_json,
)


def verl_omni_body(waveform: np.ndarray, sample_rate: int, prompt: str, extra_info: dict) -> bytes:
    """The request exactly as verl-omni's audio scorer client serialises it."""
    arr = np.asarray(waveform, dtype=np.float32)
    payload = {
        "protocol_version": "1",
        "waveform_f32_base64": base64.b64encode(arr.astype("<f4").tobytes()).decode("ascii"),
        "num_samples": int(arr.shape[0]),
        "sample_rate": int(sample_rate),
        "prompt": prompt,
        "metadata": extra_info,
    }
    return json.dumps(payload).encode("utf-8")


def test_verl_omni_request_validates_and_decodes() -> None:
    wave = np.sin(np.arange(24_000) / 10).astype(np.float32)
    body = verl_omni_body(wave, 24_000, "the quick brown fox", {"index": 7, "split": "train"})
    req = decode_score_request(parse_json(body))
    assert req.sample_rate == 24_000 and req.prompt == "the quick brown fox"
    assert req.metadata == {"index": 7, "split": "train"}
    assert req.encoding == "waveform_f32_base64"
    assert req.duration_s == pytest.approx(1.0)
    assert np.array_equal(req.waveform, wave)


def _code(obj: object, limits: Limits = DEFAULT_LIMITS) -> tuple[str, str]:
    with pytest.raises(ProtocolError) as err:
        decode_score_request(obj, limits)
    return err.value.code, str(err.value)


def _base() -> dict:
    return json.loads(verl_omni_body(np.zeros(1600, np.float32), 16_000, "hi", {}))


def test_unsupported_version_lists_supported_ones() -> None:
    code, msg = _code(dict(_base(), protocol_version="7"))
    assert code == "unsupported_protocol_version" and "supported: 1" in msg


@pytest.mark.parametrize(
    "patch, code, field",
    [
        ({"waveform_f32_base64": "####"}, "invalid_base64", "waveform_f32_base64"),
        (
            {"waveform_f32_base64": base64.b64encode(b"123").decode(), "num_samples": 0},
            "invalid_audio_length",
            "waveform_f32_base64",
        ),
        ({"num_samples": 5}, "num_samples_mismatch", "num_samples"),
        ({"waveform_f32_base64": "", "num_samples": 0}, "empty_audio", "waveform_f32_base64"),
        ({"sample_rate": -16000}, "invalid_sample_rate", "sample_rate"),
        ({"sample_rate": 999}, "invalid_sample_rate", "sample_rate"),
        ({"sample_rate": 192_001}, "invalid_sample_rate", "sample_rate"),
        ({"sample_rate": True}, "invalid_sample_rate", "sample_rate"),
        ({"metadata": {"a": {"b": 1}}}, "invalid_metadata", "metadata.a"),
        ({"prompt": None}, "invalid_prompt", "prompt"),
        ({"extra": 1}, "unknown_field", "extra"),
    ],
)
def test_each_malformed_case_has_its_own_error(patch: dict, code: str, field: str) -> None:
    got, msg = _code(dict(_base(), **patch))
    assert got == code
    assert f"$.{field}" in msg


def test_non_finite_samples() -> None:
    wave = np.zeros(100, np.float32)
    wave[10] = np.nan
    wave[20] = np.inf
    code, msg = _code(json.loads(verl_omni_body(wave, 16_000, "x", {})))
    assert code == "non_finite_audio" and "2 NaN or infinite" in msg


def test_nan_literal_in_metadata_names_the_field() -> None:
    body = verl_omni_body(np.zeros(10, np.float32), 16_000, "x", {"temperature": float("nan")})
    code, msg = _code(parse_json(body))
    assert code == "invalid_metadata" and "$.metadata.temperature" in msg


def test_audio_length_limit_is_configurable() -> None:
    obj = json.loads(verl_omni_body(np.zeros(16_000 * 3, np.float32), 16_000, "x", {}))
    decode_score_request(obj, Limits(max_audio_seconds=3))
    code, msg = _code(obj, Limits(max_audio_seconds=2.5))
    assert code == "audio_too_long" and "2.5 s" in msg


def test_oversized_base64_is_refused_before_decoding() -> None:
    """Hours of audio are refused from the text length, not after allocating the samples."""
    text = "A" * (4 * 1_000_000)  # 3 MB of zeros: 750k f32 samples, 750 s at 1 kHz
    code, _ = _code(dict(_base(), waveform_f32_base64=text, num_samples=750_000, sample_rate=1000))
    assert code == "audio_too_long"


def test_every_issue_is_reported() -> None:
    with pytest.raises(ProtocolError) as err:
        decode_score_request(dict(_base(), sample_rate="x", prompt=3, bogus=True))
    assert {i.code for i in err.value.issues} == {"invalid_sample_rate", "invalid_prompt", "unknown_field"}


def test_malformed_json() -> None:
    for body in (b"{", b"", b"[" * 100_000, b'{"a": 1e999999}x'):
        with pytest.raises(ProtocolError) as err:
            parse_json(body)
        assert err.value.code == "malformed_json"


def test_batch_keeps_order_and_isolates_item_errors() -> None:
    good = _base()
    del good["protocol_version"]
    pcm = {"waveform_pcm16_base64": encode_pcm16(np.zeros(160, np.float32)), "sample_rate": 16000, "prompt": "b"}
    version, items = decode_batch_request(
        {"protocol_version": "1", "items": [good, dict(good, sample_rate=0), pcm, dict(pcm, protocol_version="9")]}
    )
    assert version == "1"
    assert [type(i).__name__ for i in items] == [
        "DecodedScoreRequest",
        "ProtocolError",
        "DecodedScoreRequest",
        "ProtocolError",
    ]
    assert items[1].code == "invalid_sample_rate" and items[1].issues[0].path == "$.items[1].sample_rate"
    assert items[3].code == "unsupported_protocol_version"
    assert items[2].encoding == "waveform_pcm16_base64"


def test_batch_envelope_errors() -> None:
    for obj, code in [
        ({"protocol_version": "2", "items": [_base()]}, "unsupported_protocol_version"),
        ({"protocol_version": "1", "items": []}, "invalid_request"),
        ({"protocol_version": "1", "items": [_base()], "x": 1}, "unknown_field"),
        ({"protocol_version": "1", "items": [_base()] * 3}, "batch_too_large"),
    ]:
        with pytest.raises(ProtocolError) as err:
            decode_batch_request(obj, Limits(max_batch_items=2))
        assert err.value.code == code


@pytest.mark.parametrize(("envelope", "expected"), [
    ({"protocol_version": "1", "items": []}, [("invalid_request", "$.items")]),
    ({"protocol_version": "1"}, [("invalid_request", "$.items")]),
    ({"protocol_version": "1", "items": None}, [("invalid_request", "$.items")]),
    ({"protocol_version": "1", "items": {"a": 1}}, [("invalid_request", "$.items")]),
    # Unknown fields are named alone, in order, whatever else is wrong (one score request sent to the batch path).
    ({"protocol_version": "1", "zeta": 1, "alpha": 2}, [("unknown_field", "$.alpha"), ("unknown_field", "$.zeta")]),
])
def test_batch_envelope_issues_are_worded_by_the_protocol(envelope: dict, expected: list) -> None:
    with pytest.raises(ProtocolError) as err:
        decode_batch_request(envelope)
    assert [(i.code, i.path) for i in err.value.issues] == expected
    if expected[0][0] == "invalid_request":
        assert err.value.issues[0].message == "items must be a non-empty array of score requests"


def test_the_decoded_request_takes_every_field_it_shares_with_the_request() -> None:
    """Pydantic fills DecodedScoreRequest from the validated request by field name: a field of the decoded
    request that the request lacks must be one decoding sets, or it would silently keep its default."""
    from audio_reward.protocol import DecodedScoreRequest, ScoreRequest

    set_by_decoding = {"waveform", "sample_rate", "protocol_version", "encoding", "speaker_reference",
                       "measure_quality"}
    assert set(DecodedScoreRequest.model_fields) - set(ScoreRequest.model_fields) <= set_by_decoding
    body = dict(_base(), language="en", request_id="r-1", reference_duration_s=0.5, metadata={"k": 1},
                reward={"formula": "exp"}, speaker_reference_id="ab" * 32, measure_quality=True)
    decoded = decode_score_request(body)
    for name in set(DecodedScoreRequest.model_fields) - set_by_decoding - {"reward"}:
        assert getattr(decoded, name) == body[name], name
    assert decoded.reward is not None and decoded.reward.model_fields_set == {"formula"}
    assert decoded.measure_quality is True and decoded.protocol_version == "1"
