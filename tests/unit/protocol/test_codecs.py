from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import soundfile as sf

from audio_reward.protocol import (
    AudioDecodeError,
    as_float32_mono,
    decode_f32,
    decode_pcm16,
    encode_f32,
    encode_file,
    encode_pcm16,
    read_audio,
)


def decode_file(text: str, max_seconds: float | None = None) -> tuple[np.ndarray, int]:
    """A base64 audio file through the one reader, which takes its bytes."""
    return read_audio(base64.b64decode(text), max_seconds=max_seconds)


def _awkward_floats() -> np.ndarray:
    rng = np.random.default_rng(0)
    special = np.array(
        [0.0, -0.0, 1e-45, -1e-45, np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1.0, -1.0], np.float32
    )
    return np.concatenate([special, rng.standard_normal(10_000).astype(np.float32)])


def test_f32_round_trip_is_bit_exact() -> None:
    wave = _awkward_floats()
    back = decode_f32(encode_f32(wave))
    assert back.dtype == np.float32
    assert back.tobytes() == wave.tobytes()


def test_f32_matches_verl_omni_encoding() -> None:
    wave = _awkward_floats()
    theirs = base64.b64encode(wave.astype("<f4").tobytes()).decode("ascii")
    assert encode_f32(wave) == theirs


def test_f32_decode_does_not_copy() -> None:
    text = encode_f32(np.arange(1000, dtype=np.float32))
    arr = decode_f32(text)
    assert not arr.flags.owndata  # a view over the decoded bytes
    assert not arr.flags.writeable


def test_big_endian_and_float64_inputs_encode_as_little_endian_f32() -> None:
    wave = np.linspace(-1, 1, 101)
    expected = wave.astype("<f4").tobytes()
    assert decode_f32(encode_f32(wave)).tobytes() == expected
    assert decode_f32(encode_f32(wave.astype(">f4"))).tobytes() == expected


def test_pcm16_round_trip_within_one_step() -> None:
    wave = np.clip(np.random.default_rng(1).standard_normal(4000) * 0.3, -0.99, 0.99).astype(np.float32)
    back = decode_pcm16(encode_pcm16(wave))
    assert np.max(np.abs(back - wave)) <= 0.5 / 32768 + 1e-8
    assert decode_pcm16(encode_pcm16(np.array([2.0, -2.0], np.float32))).tolist() == [32767 / 32768, -1.0]


def test_wav_file_round_trip_is_exact_and_flac_is_16_bit() -> None:
    wave = _awkward_floats()[8:] * 0.1
    back, rate = decode_file(encode_file(wave, 22_050))
    assert rate == 22_050 and back.tobytes() == wave.astype(np.float32).tobytes()
    back, rate = decode_file(encode_file(wave, 16_000, fmt="FLAC"))
    assert rate == 16_000 and np.max(np.abs(back - wave)) < 1.0 / 16384


def test_stereo_file_is_averaged_to_mono() -> None:
    left = np.full(100, 0.5, np.float32)
    right = np.full(100, -0.25, np.float32)
    buf = io.BytesIO()
    sf.write(buf, np.stack([left, right], axis=1), 8000, format="WAV", subtype="FLOAT")
    back, _ = decode_file(base64.b64encode(buf.getvalue()).decode())
    assert np.allclose(back, 0.125)


def test_file_decoder_rejects_garbage_and_long_audio() -> None:
    with pytest.raises(AudioDecodeError) as err:
        decode_file(base64.b64encode(b"RIFF not really a wave file").decode())
    assert err.value.code == "invalid_audio_file"
    with pytest.raises(AudioDecodeError) as err:
        decode_file(encode_file(np.zeros(3000, np.float32), 1000), max_seconds=2.0)
    assert err.value.code == "audio_too_long"


def test_strict_base64() -> None:
    for bad in ("abc", "ab$=", "AAAA AAAA"):
        with pytest.raises(AudioDecodeError) as err:
            decode_f32(bad)
        assert err.value.code == "invalid_base64"


def test_as_float32_mono_accepts_lists_columns_and_int16() -> None:
    assert as_float32_mono([0.0, 0.5]).dtype == np.float32
    assert as_float32_mono(np.zeros((10, 1))).shape == (10,)
    assert as_float32_mono(np.array([16384], np.int16))[0] == 0.5
    with pytest.raises(ValueError, match="mono"):
        as_float32_mono(np.zeros((2, 10)))


def test_as_float32_mono_accepts_torch_tensors_when_torch_is_present() -> None:
    torch = pytest.importorskip("torch", reason="needs torch (the transformers extra, torch==2.13.0 first)")
    t = torch.linspace(-1, 1, 50, requires_grad=True)
    assert np.array_equal(as_float32_mono(t), t.detach().numpy())
