"""The score answer is a declared model: every field the scorer fills is in it, a peer's extras are only checked."""

from __future__ import annotations

import pytest

from audio_reward.protocol import RewardPolicy, ScoreResponse, validate_message
from audio_reward.scoring import get_normalizer, score_transcript

PEER_ANSWER = {  # verl-omni's reference scorer (whisper_cer_scorer.py) answers these keys
    "score": 0.9, "cer": 0.1, "cer_capped": 0.1, "asr_text": "hello world", "normalized_target": "hello world",
    "normalized_hypothesis": "hello world", "sample_id": "7",
}


def test_every_scoring_diagnostic_is_a_declared_field_in_the_order_sent() -> None:
    result = score_transcript("The quick brown fox.", "the quick brown box", normalizer=get_normalizer("basic"),
                              policy=RewardPolicy(), language="en", duration_s=1.5, reference_duration_s=None)
    diagnostics = result.response().model_dump(exclude_none=True)
    answer = ScoreResponse.model_validate(diagnostics, extra="forbid")
    assert answer.model_dump(exclude_unset=True) == diagnostics
    declared = list(ScoreResponse.model_fields)
    assert list(diagnostics) == sorted(diagnostics, key=declared.index)


def test_a_peers_own_scalar_diagnostics_are_accepted_and_left_out_of_the_model() -> None:
    assert validate_message(PEER_ANSWER, "score_response") == ("score_response", [])
    answer = ScoreResponse.model_validate(PEER_ANSWER)
    assert answer.model_dump(exclude_unset=True) == {"score": 0.9, "cer": 0.1}


@pytest.mark.parametrize(("bad", "code"), [
    ({"asr_text": ["a", "b"]}, "invalid_request"), ({"cer": "0.1"}, "invalid_request"),
    ({"ref_chars": 3.0}, "invalid_request"), ({"empty_transcript": 0}, "invalid_request"),
    ({"speaker_reference_id": "not-hex"}, "invalid_speaker_reference"),
])
def test_a_declared_field_of_the_wrong_type_or_a_nested_extra_is_refused(bad: dict[str, object], code: str) -> None:
    _, issues = validate_message({**PEER_ANSWER, **bad}, "score_response")
    assert issues and issues[0].code == code, issues
