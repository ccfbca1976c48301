"""Reward formulas at known points, penalties, request overrides and their validation."""

from __future__ import annotations

import math

import pytest

from audio_reward.protocol import RewardOptions
from audio_reward.scoring import RewardPolicy, repeated_ngram_fraction, shape_reward


def _shape(policy: RewardPolicy, err: float, transcript: str = "a b c", duration: float = 2.0, expected: float = 2.0):
    return shape_reward(
        policy, err, transcript_normalized=transcript, duration_s=duration, expected_duration_s=expected
    )


@pytest.mark.parametrize(("err", "expected"), [(0.0, 1.0), (0.1, 0.9), (0.5, 0.5), (1.0, 0.0), (3.7, 0.0)])
def test_one_minus_cer(err: float, expected: float) -> None:
    assert _shape(RewardPolicy(formula="1-cer"), err).score == pytest.approx(expected)


@pytest.mark.parametrize(
    ("err", "expected"), [(0.0, 1.0), (0.2, math.exp(-0.5)), (0.4, math.exp(-1.0)), (1.0, math.exp(-2.5))]
)
def test_exp_default_k(err: float, expected: float) -> None:
    assert _shape(RewardPolicy(formula="exp"), err).score == pytest.approx(expected)


def test_exp_clips_the_error_before_the_formula() -> None:
    # A looping transcript (raw CER 5) scores like CER 1, not ~0, so the gradient stays informative.
    looped = _shape(RewardPolicy(formula="exp"), 5.0)
    assert looped.error_rate == 5.0 and looped.error_clipped == 1.0
    assert looped.score == pytest.approx(math.exp(-2.5))
    assert _shape(RewardPolicy(formula="exp", exp_k=1.0, error_clip=3.0), 5.0).score == pytest.approx(math.exp(-3.0))


@pytest.mark.parametrize(
    ("err", "expected"), [(0.0, 1.0), (0.1, 1 - math.tanh(0.3)), (0.2, 1 - math.tanh(0.6)), (1.0, 1 - math.tanh(3.0))]
)
def test_tanh(err: float, expected: float) -> None:
    assert _shape(RewardPolicy(formula="tanh"), err).score == pytest.approx(expected)


def test_penalties_are_off_by_default() -> None:
    r = _shape(RewardPolicy(), 0.0, transcript="", duration=0.01, expected=10.0)
    assert r.score == 1.0  # error 0 with an empty transcript means the reference was empty too
    assert (r.penalty_empty, r.penalty_duration, r.penalty_short_audio, r.penalty_repeat) == (0.0, 0.0, 0.0, 0.0)
    assert r.empty_transcript is True


def test_empty_transcript_penalty() -> None:
    policy = RewardPolicy(formula="exp", empty_transcript_penalty=0.5)
    r = _shape(policy, 1.0, transcript="")
    assert r.penalty_empty == 0.5
    assert r.score == 0.0  # exp(-2.5) - 0.5 clips at 0
    assert _shape(policy, 0.0, transcript="").penalty_empty == 0.0


def test_duration_penalty_outside_the_ratio_band() -> None:
    policy = RewardPolicy(duration_penalty=0.3)
    assert _shape(policy, 0.0, duration=1.0, expected=2.0).penalty_duration == 0.0  # ratio 0.5: inside
    assert _shape(policy, 0.0, duration=4.0, expected=2.0).penalty_duration == 0.0  # ratio 2.0: inside
    slow = _shape(policy, 0.0, duration=4.2, expected=2.0)
    assert slow.duration_ratio == pytest.approx(2.1)
    assert slow.penalty_duration == 0.3 and slow.score == pytest.approx(0.7)
    fast = _shape(policy, 0.1, duration=0.9, expected=2.0)
    assert fast.score == pytest.approx(0.9 - 0.3)


def test_duration_check_skipped_without_expectation() -> None:
    r = _shape(RewardPolicy(duration_penalty=0.3), 0.0, duration=5.0, expected=0.0)
    assert (r.duration_checked, r.duration_ratio, r.penalty_duration) == (False, 0.0, 0.0)


def test_short_audio_penalty() -> None:
    policy = RewardPolicy(min_duration_s=1.0, short_audio_penalty=0.25)
    assert _shape(policy, 0.0, duration=0.5, expected=0.0).score == pytest.approx(0.75)
    assert _shape(policy, 0.0, duration=1.0, expected=0.0).penalty_short_audio == 0.0


def test_repeated_ngram_fraction() -> None:
    assert repeated_ngram_fraction(["a", "b", "c", "d", "e", "f"], 2) == 0.0
    # "a b a b a b": bigrams ab ba ab ba ab -> 2 distinct of 5, 3 repeats.
    assert repeated_ngram_fraction(["a", "b", "a", "b", "a", "b"], 2) == pytest.approx(3 / 5)
    assert repeated_ngram_fraction(["x"] * 11, 1) == pytest.approx(10 / 11)
    assert repeated_ngram_fraction(["a", "b"], 4) == 0.0


def test_repeat_penalty_scales_with_the_fraction() -> None:
    policy = RewardPolicy(repeat_ngram_n=2, repeat_penalty=0.5)
    r = _shape(policy, 0.0, transcript="a b a b a b")
    assert r.repeated_ngram_fraction == pytest.approx(0.6)
    assert r.penalty_repeat == pytest.approx(0.3)
    assert r.score == pytest.approx(0.7)


def test_penalties_add_up_and_clip_at_zero() -> None:
    policy = RewardPolicy(
        duration_penalty=0.4, short_audio_penalty=0.4, min_duration_s=1.0, repeat_penalty=1.0, repeat_ngram_n=1
    )
    r = _shape(policy, 0.0, transcript="x x x x", duration=0.1, expected=2.0)
    assert r.penalty_duration + r.penalty_short_audio + r.penalty_repeat > 1.0
    assert r.score == 0.0 and r.base == 1.0


def test_with_options_overrides_only_set_fields() -> None:
    base = RewardPolicy(duration_penalty=0.2)
    assert base.with_options(None) is base
    assert base.with_options(RewardOptions()) == base
    updated = base.with_options(RewardOptions(formula="tanh", metric="wer", repeat_ngram_n=3, duration_ratio_max=3.0))
    assert (updated.formula, updated.metric, updated.repeat_ngram_n, updated.duration_ratio_max) == (
        "tanh",
        "wer",
        3,
        3.0,
    )
    assert updated.duration_penalty == 0.2 and updated.exp_k == 2.5


def test_with_options_rejects_inverted_ratio_band() -> None:
    with pytest.raises(ValueError, match=r"duration_ratio_min \(2.5\) must be less than duration_ratio_max \(2.0\)"):
        RewardPolicy().with_options(RewardOptions(duration_ratio_min=2.5))
    with pytest.raises(ValueError, match="must be less than"):
        RewardPolicy().with_options(RewardOptions(duration_ratio_min=1.0, duration_ratio_max=1.0))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"formula": "square"}, "formula must be one of 1-cer, exp, tanh, got 'square'"),
        ({"metric": "per"}, "metric must be one of cer, wer"),
        ({"exp_k": 0.0}, "exp_k must be a finite number > 0"),
        ({"exp_k": math.inf}, "exp_k must be a finite number > 0"),
        ({"error_clip": -1.0}, "error_clip must be a finite number > 0"),
        ({"duration_penalty": 1.5}, r"duration_penalty must be in \[0, 1\], got 1.5"),
        ({"repeat_penalty": math.nan}, r"repeat_penalty must be in \[0, 1\]"),
        ({"duration_ratio_min": 0.0}, "duration_ratio_min must be a finite number > 0"),
        ({"min_duration_s": -0.1}, "min_duration_s must be a finite number >= 0"),
        ({"repeat_ngram_n": 0}, "repeat_ngram_n must be an integer >= 1"),
        ({"repeat_ngram_n": 2.0}, "repeat_ngram_n must be an integer >= 1"),
    ],
)
def test_invalid_policy_messages(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RewardPolicy(**fields)


def test_invalid_policy_lists_every_problem() -> None:
    with pytest.raises(ValueError) as info:
        RewardPolicy(exp_k=-1.0, duration_penalty=2.0)
    assert "exp_k" in str(info.value) and "duration_penalty" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"err": math.nan}, "error_rate must be a finite number >= 0"),
        ({"err": -0.1}, "error_rate must be a finite number >= 0"),
        ({"duration": math.inf}, "duration_s must be a finite number >= 0"),
        ({"expected": -1.0}, "expected_duration_s must be a finite number >= 0"),
    ],
)
def test_shape_reward_rejects_bad_numbers(kwargs: dict, message: str) -> None:
    args = {"err": 0.1, "duration": 1.0, "expected": 1.0} | kwargs
    with pytest.raises(ValueError, match=message):
        _shape(RewardPolicy(), args["err"], duration=args["duration"], expected=args["expected"])


@pytest.mark.parametrize("formula", ["1-cer", "exp", "tanh"])
def test_score_stays_in_unit_interval(formula: str) -> None:
    policy = RewardPolicy(formula=formula, exp_k=100.0, error_clip=50.0, empty_transcript_penalty=1.0)
    for err in (0.0, 1e-12, 0.3, 1.0, 49.0, 1e300):
        for transcript in ("", "a b c"):
            r = _shape(policy, err, transcript=transcript)
            assert 0.0 <= r.score <= 1.0 and math.isfinite(r.score)


def test_tiny_expected_duration_keeps_ratio_finite() -> None:
    r = _shape(RewardPolicy(duration_penalty=0.5), 0.0, duration=1.0, expected=5e-324)
    assert math.isfinite(r.duration_ratio) and r.penalty_duration == 0.5
