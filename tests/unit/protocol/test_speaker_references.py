"""Speaker references on the wire: the inline recording decoded and bounded, the registration body checked."""

from __future__ import annotations

import numpy as np
import pytest

from audio_reward.protocol import (
    Limits,
    ProtocolError,
    ScoreRequest,
    decode_batch_request,
    decode_score_request,
    decode_speaker_request,
    encode_f32,
    encode_file,
)

RATE = 16_000
TONE = (0.1 * np.sin(2 * np.pi * 220 * np.arange(RATE) / RATE)).astype(np.float32)


def _request(**extra: object) -> dict[str, object]:
    return {"protocol_version": "1", "waveform_f32_base64": encode_f32(TONE), "sample_rate": RATE, "prompt": "hi",
            **extra}


def test_an_inline_reference_is_decoded_at_its_own_rate() -> None:
    reference = np.tile(TONE, 2)
    decoded = decode_score_request(_request(speaker_reference_audio_base64=encode_file(reference, 24_000)))
    assert decoded.speaker_reference is not None and decoded.speaker_reference.sample_rate == 24_000
    np.testing.assert_allclose(decoded.speaker_reference.waveform, reference, atol=1 / 32768)
    assert decoded.speaker_reference_id is None


def test_one_reference_or_the_other_is_a_rule_of_the_model_checked_before_any_audio_is_decoded() -> None:
    both = {"speaker_reference_id": "ab" * 32, "speaker_reference_audio_base64": encode_file(TONE, RATE)}
    with pytest.raises(ValueError, match="not both"):
        ScoreRequest.model_validate(_request(**both))  # a sender's model refuses it too
    # The audio's own faults (found while decoding it) come after the request's shape.
    nan = encode_f32(np.full(RATE, np.nan, dtype=np.float32))
    for bad_audio in ({}, {"waveform_f32_base64": "!!!"}, {"waveform_f32_base64": nan}, {"num_samples": 7}):
        with pytest.raises(ProtocolError) as raised:
            decode_score_request(_request(**both, **bad_audio))
        assert [(i.code, i.path, i.message) for i in raised.value.issues] == [
            ("invalid_speaker_reference", "$.speaker_reference_audio_base64",
             "send either speaker_reference_id or speaker_reference_audio_base64, not both")]


def test_an_inline_reference_is_bounded_like_the_audio() -> None:
    long = encode_file(np.zeros(RATE * 3, dtype=np.float32), RATE)
    with pytest.raises(ProtocolError) as raised:
        decode_score_request(_request(speaker_reference_audio_base64=long), Limits(max_audio_seconds=2))
    assert raised.value.code == "audio_too_long" and raised.value.issues[0].path == "$.speaker_reference_audio_base64"


def test_inline_references_share_the_batchs_audio_budget() -> None:
    # Silence compresses to almost nothing in FLAC: the budget counts what the references decode to.
    silent = encode_file(np.zeros(RATE * 2, dtype=np.float32), RATE, fmt="FLAC")
    items = [_request(speaker_reference_audio_base64=silent) for _ in range(3)]
    limits = Limits(max_batch_audio_bytes=3 * TONE.nbytes + 2 * RATE * 2 * 4)  # the audio and two references
    with pytest.raises(ProtocolError) as raised:
        decode_batch_request({"protocol_version": "1", "items": items}, limits)
    assert raised.value.code == "batch_too_large"
    _, decoded = decode_batch_request({"protocol_version": "1", "items": items[:2]}, limits)
    assert all(not isinstance(d, ProtocolError) for d in decoded)


def test_a_registration_takes_the_audio_encodings_and_nothing_else() -> None:
    raw = decode_speaker_request({"protocol_version": "1", "waveform_f32_base64": encode_f32(TONE),
                                  "sample_rate": RATE, "num_samples": RATE})
    assert raw.sample_rate == RATE and raw.duration_s == 1.0
    with pytest.raises(ProtocolError) as raised:
        decode_speaker_request({"protocol_version": "1", "waveform_f32_base64": encode_f32(TONE)})
    assert raised.value.code == "missing_field"
    with pytest.raises(ProtocolError) as raised:
        decode_speaker_request({"protocol_version": "2", "audio_file_base64": encode_file(TONE, RATE)})
    assert raised.value.code == "unsupported_protocol_version"


def test_measure_quality_is_decoded_and_sent_only_when_asked() -> None:
    import orjson

    from audio_reward.scorer_client.wire import ScoreItem, prepare

    assert decode_score_request(_request(measure_quality=True)).measure_quality
    assert not decode_score_request(_request()).measure_quality
    with pytest.raises(ProtocolError) as raised:
        decode_score_request(_request(measure_quality="yes"))
    assert raised.value.issues[0].path == "$.measure_quality"
    asked = orjson.loads(prepare(ScoreItem(TONE, RATE, "hi", measure_quality=True)).body)
    assert asked["measure_quality"] is True
    assert "measure_quality" not in orjson.loads(prepare(ScoreItem(TONE, RATE, "hi")).body)
