"""A rollout's waveform and sample rate pass the client's own checks, with the client's messages."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from audio_reward.scorer_client.errors import InvalidInputError
from audio_reward.scorer_client.wire import check_sample_rate, check_waveform
from audio_reward.trainer_plugin.samples import SampleError, as_sample_rate, as_waveform


def test_leading_singleton_dims_and_object_arrays_unwrap_to_mono() -> None:
    assert as_waveform(np.zeros((1, 1, 10), np.float64)).shape == (10,)
    assert as_waveform(np.array([np.float32(0.5)] * 3, dtype=object)).dtype == np.float32


@pytest.mark.parametrize(("audio", "message"), [
    ([], "audio holds no samples"),
    ([0.0, float("nan"), float("inf")], "audio holds 2 NaN or infinite samples"),
    (np.zeros((2, 3)), "audio is not mono numeric samples: waveform must be mono (1-D), got shape (2, 3)"),
])
def test_bad_audio_is_a_sample_error_with_the_clients_message(audio: Any, message: str) -> None:
    with pytest.raises(SampleError) as info:
        as_waveform(audio)
    assert str(info.value) == message
    with pytest.raises(InvalidInputError) as client:
        check_waveform(audio, "audio")
    assert str(client.value) == message


@pytest.mark.parametrize(("rate", "expected"), [
    (16000, 16000), (24000.0, 24000), (np.int64(22050), 22050), (np.float32(8000), 8000), (np.array([44100]), 44100),
])
def test_sample_rates_of_any_numeric_kind(rate: Any, expected: int) -> None:
    assert as_sample_rate(rate) == expected == check_sample_rate(rate)


@pytest.mark.parametrize(("rate", "message"), [
    (np.array([1, 2]), "sample_rate must be one number, got shape (2,)"),
    ("16000", "sample_rate must be an integer (Hz), got '16000'"),
    (True, "sample_rate must be an integer (Hz), got True"),
    (16000.5, "sample_rate must be an integer (Hz), got 16000.5"),
    (0, "sample_rate must be from 1000 to 192000 Hz, got 0"),
])
def test_bad_sample_rates_are_sample_errors_with_the_clients_message(rate: Any, message: str) -> None:
    with pytest.raises(SampleError) as info:
        as_sample_rate(rate)
    assert str(info.value) == message
