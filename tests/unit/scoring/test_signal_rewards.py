"""Speaker similarity and quality sharing the score with the CER reward: the documented formula at known points."""

from __future__ import annotations

import pytest

from audio_reward.protocol import RewardOptions
from audio_reward.scoring import RewardPolicy, TranscriptScore, compose_reward, get_normalizer, score_transcript
from audio_reward.scoring.rewards import quality_term, speaker_term


def test_weights_default_to_zero_and_leave_the_score_alone() -> None:
    composed = compose_reward(RewardPolicy(), 0.8, speaker_similarity=0.1, quality_mos=1.0)
    assert composed.score == 0.8
    assert composed.speaker_term == 0.1 and composed.quality_term == 0.0
    assert compose_reward(RewardPolicy(), 0.8, speaker_similarity=None, quality_mos=None).score == 0.8


def test_the_worked_example_of_docs_scoring() -> None:
    # docs/scoring.md: CER reward 0.9, similarity 0.6, DNSMOS OVRL 3.4, weights 0.3 and 0.2.
    policy = RewardPolicy(speaker_weight=0.3, quality_weight=0.2)
    composed = compose_reward(policy, 0.9, speaker_similarity=0.6, quality_mos=3.4)
    assert composed.quality_term == pytest.approx(0.6)
    assert composed.score == pytest.approx(0.5 * 0.9 + 0.3 * 0.6 + 0.2 * 0.6)  # 0.75


@pytest.mark.parametrize(("cosine", "term"), [(-0.4, 0.0), (0.0, 0.0), (0.55, 0.55), (1.0, 1.0)])
def test_speaker_term_clips_negative_cosines(cosine: float, term: float) -> None:
    assert speaker_term(cosine) == term


@pytest.mark.parametrize(("mos", "term"), [(0.7, 0.0), (1.0, 0.0), (3.0, 0.5), (5.0, 1.0), (5.3, 1.0)])
def test_quality_term_maps_mos_one_to_five_onto_zero_to_one(mos: float, term: float) -> None:
    assert quality_term(mos) == pytest.approx(term)


def test_speaker_floor_zeroes_a_score_that_traded_the_voice_away() -> None:
    policy = RewardPolicy(speaker_floor=0.5)
    low = compose_reward(policy, 1.0, speaker_similarity=0.49, quality_mos=None)
    assert low.score == 0.0 and low.speaker_floor_applied
    high = compose_reward(policy, 1.0, speaker_similarity=0.5, quality_mos=None)
    assert high.score == 1.0 and not high.speaker_floor_applied


def test_a_weighed_signal_must_be_given() -> None:
    with pytest.raises(ValueError, match="speaker similarity"):
        compose_reward(RewardPolicy(speaker_weight=0.2), 1.0, speaker_similarity=None, quality_mos=3.0)
    with pytest.raises(ValueError, match="speaker similarity"):
        compose_reward(RewardPolicy(speaker_floor=0.1), 1.0, speaker_similarity=None, quality_mos=None)
    with pytest.raises(ValueError, match="quality"):
        compose_reward(RewardPolicy(quality_weight=0.2), 1.0, speaker_similarity=None, quality_mos=None)


def test_request_options_bound_the_weights_together() -> None:
    assert RewardPolicy().with_options(RewardOptions(speaker_weight=0.4, quality_weight=0.6)).quality_weight == 0.6
    with pytest.raises(ValueError, match="add up to at most 1"):
        RewardPolicy().with_options(RewardOptions(speaker_weight=0.5, quality_weight=0.6))
    with pytest.raises(ValueError, match=r"speaker_floor must be in \[-1, 1\]"):
        RewardPolicy(speaker_floor=1.5)


def _scored(policy: RewardPolicy, **signals: float | None) -> TranscriptScore:
    return score_transcript("one two three four", "one two tree four", normalizer=get_normalizer("basic"),
                            policy=policy, language="en", duration_s=1.5, reference_duration_s=None, **signals)


def test_score_transcript_composes_the_measured_signals_once_and_reports_their_terms() -> None:
    policy = RewardPolicy(speaker_weight=0.3, quality_weight=0.2)
    plain = _scored(RewardPolicy())
    both = _scored(policy, speaker_similarity=0.6, quality_mos=3.4)
    expected = compose_reward(policy, plain.reward.score, speaker_similarity=0.6, quality_mos=3.4)
    assert both.composed == expected and both.score == expected.score
    d = both.response().model_dump(exclude_none=True)
    assert d["score"] == expected.score and d["reward_asr"] == plain.score
    assert (d["reward_speaker"], d["speaker_weight"], d["speaker_floor_applied"]) == (0.6, 0.3, False)
    assert (d["reward_quality"], d["quality_weight"]) == (pytest.approx(0.6), 0.2)


def test_score_transcript_without_signals_keeps_its_keys_and_each_signal_adds_only_its_own() -> None:
    plain = _scored(RewardPolicy()).response().model_dump(exclude_none=True)
    assert plain.keys().isdisjoint({"reward_asr", "reward_speaker", "reward_quality"})
    speaker = _scored(RewardPolicy(), speaker_similarity=0.5).response().model_dump(exclude_none=True)
    assert speaker.keys() - plain.keys() == {"reward_asr", "reward_speaker", "speaker_weight", "speaker_floor_applied"}
    quality = _scored(RewardPolicy(), quality_mos=2.0).response().model_dump(exclude_none=True)
    assert quality.keys() - plain.keys() == {"reward_asr", "reward_quality", "quality_weight"}
    assert speaker["score"] == quality["score"] == plain["score"]  # weights 0: the signals leave the score alone
