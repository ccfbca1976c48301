"""The client's request bodies are dumps of the protocol's request models, with the bytes verl-omni's v1 has."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from audio_reward.protocol import ScoreRequest, SpeakerRequest, decode_score_request, encode_f32
from audio_reward.scorer_client import InvalidInputError, ScoreItem
from audio_reward.scorer_client.wire import prepare, speaker_body

WAVE = np.linspace(-0.5, 0.5, 160, dtype=np.float32)


def test_a_plain_body_is_verl_omni_s_v1_fields_then_the_request_id() -> None:
    body = prepare(ScoreItem(WAVE, 16000, "hello", metadata={"index": 3, "none": None}, request_id="r1")).body
    assert body == orjson.dumps({"protocol_version": "1", "waveform_f32_base64": encode_f32(WAVE), "num_samples": 160,
                                 "sample_rate": 16000, "prompt": "hello", "metadata": {"index": 3, "none": None},
                                 "request_id": "r1"})
    assert np.array_equal(decode_score_request(orjson.loads(body)).waveform, WAVE)


def test_the_extensions_follow_in_the_models_order_and_validate() -> None:
    reference = "ab" * 32
    body = prepare(ScoreItem(WAVE, 24000, "hi", language="en", reward={"formula": "exp", "exp_k": 3},
                             reference_duration_s=2, request_id="r2", speaker_reference_id=reference)).body
    obj = orjson.loads(body)
    assert list(obj) == ["protocol_version", "waveform_f32_base64", "num_samples", "sample_rate", "prompt", "metadata",
                         "request_id", "language", "reference_duration_s", "reward", "speaker_reference_id"]
    assert obj["reward"] == {"formula": "exp", "exp_k": 3.0} and obj["reference_duration_s"] == 2.0
    assert ScoreRequest.model_validate(obj).model_dump(exclude_none=True) == obj


def test_a_speaker_body_is_the_speaker_request_model() -> None:
    _, body = speaker_body(WAVE, 16000)
    assert list(orjson.loads(body)) == ["protocol_version", "waveform_f32_base64", "num_samples", "sample_rate"]
    SpeakerRequest.model_validate_json(body)


@pytest.mark.parametrize(("item", "words"), [
    (ScoreItem(WAVE, 16000, "lone \ud800 surrogate"), "lone surrogate at character 5"),
    (ScoreItem(WAVE, 16000, "x", language="e"), "language"),
    (ScoreItem(WAVE, 16000, "x", language=5), "language"),  # type: ignore[arg-type]
])
def test_what_the_protocol_refuses_is_refused_before_sending(item: ScoreItem, words: str) -> None:
    with pytest.raises(InvalidInputError, match=words):
        prepare(item)


@pytest.mark.parametrize("where", ["speech.wav", Path("speech.wav")], ids=["str", "Path"])
def test_a_file_path_given_as_the_waveform_says_how_to_score_a_file(where: str | Path) -> None:
    """Issue 40, finding 3: numpy reads a path as a 0-d array, which gave 'must be mono (1-D), got shape ()'."""
    with pytest.raises(InvalidInputError) as info:
        prepare(ScoreItem(where, 16000, "hello"))
    message = str(info.value)
    assert message.startswith("waveform is a file path ('speech.wav'), not samples")
    assert "score_file(path, text)" in message and "read_audio(path)" in message and "shape ()" not in message
