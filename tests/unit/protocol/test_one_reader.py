"""The request models validate themselves, and every audio file is read by one reader.

Real libsndfile and FFmpeg (PyAV) decode real files written here; the models are validated as a
sender (no context) and as a receiver (the server's limits as validation context).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from pydantic import ValidationError

from audio_reward.protocol import (
    AudioDecodeError,
    Limits,
    ScoreRequest,
    SpeakerRequest,
    encode_f32,
    issues_from_pydantic,
    read_audio,
)
from audio_reward.protocol.audio import FileDecoder

TONE = (0.1 * np.sin(np.arange(16_000) * 2 * np.pi * 440 / 16_000)).astype(np.float32)


def _file(samples: np.ndarray, rate: int = 16_000, fmt: str = "WAV", subtype: str = "FLOAT") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, samples, rate, format=fmt, subtype=subtype)
    return buf.getvalue()


def _issues(model: type, obj: dict, limits: Limits | None = None) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as info:
        model.model_validate(obj, context={"limits": limits} if limits else None)
    return [(i.code, i.path) for i in issues_from_pydantic(info.value)]


def _request(**fields: object) -> dict:
    return {"protocol_version": "1", "prompt": "hello", "waveform_f32_base64": encode_f32(TONE),
            "sample_rate": 16_000, **fields}


def test_a_sender_built_request_checks_the_protocol_rules_but_no_receiver_limit() -> None:
    ScoreRequest.model_validate(_request(prompt="x" * 50_000))  # the server's limits are the server's to apply
    assert _issues(ScoreRequest, _request(sample_rate=None)) == [("missing_field", "$.sample_rate")]
    assert _issues(ScoreRequest, _request(protocol_version="2")) == [
        ("unsupported_protocol_version", "$.protocol_version")]
    assert _issues(ScoreRequest, _request(waveform_pcm16_base64="AAAA")) == [("invalid_audio_encoding", "$")]
    with pytest.raises(ValidationError):
        ScoreRequest(protocol_version="1", prompt="no audio")  # type: ignore[call-arg]


def test_the_receivers_limits_arrive_as_validation_context() -> None:
    limits = Limits(max_prompt_chars=3, max_audio_bytes=1_000)
    assert _issues(ScoreRequest, _request(), limits) == [("prompt_too_long", "$.prompt")]
    assert _issues(ScoreRequest, _request(prompt="hi"), limits) == [("audio_too_large", "$.waveform_f32_base64")]
    assert _issues(SpeakerRequest, {"protocol_version": "1", "audio_file_base64": "AAAA", "sample_rate": 16_000}) \
        == [("invalid_sample_rate", "$.sample_rate")]


def test_bytes_and_paths_read_alike_and_channels_mix_to_mono(tmp_path: Path) -> None:
    stereo = np.stack([TONE, -TONE * 0.5], axis=1)
    (tmp_path / "a.flac").write_bytes(_file(stereo, 22_050, "FLAC", "PCM_16"))
    from_path, rate = read_audio(tmp_path / "a.flac")
    from_bytes, _ = read_audio((tmp_path / "a.flac").read_bytes())
    assert rate == 22_050 and from_path.dtype == np.float32 and from_path.ndim == 1
    np.testing.assert_array_equal(from_path, from_bytes)
    np.testing.assert_allclose(from_path, TONE * 0.25, atol=1e-4)


@pytest.mark.parametrize(("samples", "code"), [
    (np.zeros(0, np.float32), "empty_audio"),
    (np.array([0.0, np.nan, np.inf], np.float32), "non_finite_audio"),
])
def test_empty_and_non_finite_audio_are_refused_once_for_every_caller(samples: np.ndarray, code: str) -> None:
    with pytest.raises(AudioDecodeError) as info:
        read_audio(_file(samples), field="clip")
    assert info.value.code == code
    assert str(info.value) == ("clip holds no samples" if code == "empty_audio"
                               else "clip holds 2 NaN or infinite samples")


def test_limits_bound_the_reading() -> None:
    with pytest.raises(AudioDecodeError) as info:
        read_audio(_file(TONE), max_seconds=0.5)
    assert info.value.code == "audio_too_long"


def test_ffmpeg_reads_what_libsndfile_does_not_at_the_rate_asked() -> None:
    pytest.importorskip("av")
    import av

    buf = io.BytesIO()
    with av.open(buf, mode="w", format="adts") as out:  # AAC: libsndfile has no reader for it
        stream = out.add_stream("aac", rate=16_000, layout="mono")
        frame = av.AudioFrame.from_ndarray(np.tile(TONE, 2)[None, :], format="flt", layout="mono")
        frame.sample_rate = 16_000
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            out.mux(packet)
    raw = buf.getvalue()
    with pytest.raises(AudioDecodeError) as info:
        read_audio(raw, field="clip")
    assert info.value.code == "invalid_audio_file"
    samples, rate = read_audio(raw, decoder=FileDecoder(rate=8_000))
    assert rate == 8_000 and abs(samples.shape[0] - 16_000) < 2_000
    own, own_rate = read_audio(raw, decoder=FileDecoder())
    assert own_rate == 16_000 and own.shape[0] > 30_000
