"""Reward shaping: an error rate plus audio facts in, a score in [0, 1] out.

Base formulas, with ``e = min(error_rate, error_clip)``:

* ``1-cer``: ``1 - min(e, 1)`` (verl-omni's reference scorer)
* ``exp``:   ``exp(-exp_k * e)`` (GLM-TTS form, ``exp_k`` 2.5 by default)
* ``tanh``:  ``clip(1 - tanh(3 * e), 0, 1)`` (CosyVoice2 GRPO)

Penalties (each 0 = off by default) are subtracted from the base and the result is
clipped to [0, 1]:

* empty transcript: ``empty_transcript_penalty`` when the normalized transcript is
  empty and the error rate is positive (a silent target answered by silence is correct);
* duration: ``duration_penalty`` when ``duration_s / expected_duration_s`` is outside
  ``[duration_ratio_min, duration_ratio_max]`` (skipped when nothing is expected);
* short audio: ``short_audio_penalty`` when ``duration_s < min_duration_s``;
* repetition: ``repeat_penalty * f`` where ``f`` is the fraction of the transcript's
  ``repeat_ngram_n``-grams that repeat an earlier one (0 for no loop, near 1 for a loop).

Speaker similarity and speech quality (both off by default) then share the
score with that CER reward ``r``, with ``w_s = speaker_weight`` and
``w_q = quality_weight`` (``w_s + w_q <= 1``):

* speaker term ``t_s = clip(similarity, 0, 1)`` (the cosine of two speaker embeddings,
  -1..1; a negative cosine is as far from the voice as the reward goes);
* quality term ``t_q = clip((MOS - 1) / 4, 0, 1)`` (DNSMOS overall MOS, 1..5);
* ``score = (1 - w_s - w_q) * r + w_s * t_s + w_q * t_q``, and 0 when the similarity is below
  ``speaker_floor`` (-1, the default, is off): a policy cannot buy CER with the voice.

The policy's fields, defaults and bounds are declared once, in
:class:`audio_reward.protocol.reward.RewardPolicy` (the wire's reward options
are its all-optional form); this module applies it.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from audio_reward.protocol.reward import RewardPolicy

__all__ = [
    "ComposedReward", "RewardBreakdown", "RewardPolicy", "compose_reward", "quality_term", "repeated_ngram_fraction",
    "shape_reward", "speaker_term",
]

MOS_MIN = 1.0
MOS_MAX = 5.0


@dataclass(frozen=True)
class RewardBreakdown:
    """The score and every term that made it."""

    score: float
    base: float
    error_rate: float
    error_clipped: float
    penalty_empty: float
    penalty_duration: float
    penalty_short_audio: float
    penalty_repeat: float
    duration_ratio: float
    duration_checked: bool
    repeated_ngram_fraction: float
    empty_transcript: bool


def repeated_ngram_fraction(units: list[str], n: int) -> float:
    """Fraction of the ``n``-grams of ``units`` that occurred earlier in the sequence."""
    total = len(units) - n + 1
    if total <= 1:
        return 0.0
    return (total - len({tuple(units[i : i + n]) for i in range(total)})) / total


def _base(policy: RewardPolicy, err: float) -> float:
    if policy.formula == "1-cer":
        return 1.0 - min(err, 1.0)
    if policy.formula == "exp":
        return math.exp(-policy.exp_k * err)
    return min(max(1.0 - math.tanh(3.0 * err), 0.0), 1.0)


def shape_reward(
    policy: RewardPolicy,
    error_rate: float,
    *,
    transcript_normalized: str,
    duration_s: float,
    expected_duration_s: float,
) -> RewardBreakdown:
    """Apply ``policy`` to one utterance.

    ``transcript_normalized`` is split on whitespace for the repetition check
    (normalized Chinese is one unit per character).  ``expected_duration_s`` of 0
    means no expectation: the duration check is skipped and the ratio reported as 0.
    """
    require_finite("error_rate", error_rate, nonnegative=True)
    require_finite("duration_s", duration_s, nonnegative=True)
    require_finite("expected_duration_s", expected_duration_s, nonnegative=True)

    clipped = min(error_rate, policy.error_clip)
    base = _base(policy, clipped)

    units = transcript_normalized.split()
    empty = not units
    penalty_empty = policy.empty_transcript_penalty if empty and error_rate > 0 else 0.0

    checked = expected_duration_s > 0
    # A subnormal expectation overflows the division; keep the reported ratio finite.
    ratio = min(duration_s / expected_duration_s, sys.float_info.max) if checked else 0.0
    outside = checked and not (policy.duration_ratio_min <= ratio <= policy.duration_ratio_max)
    penalty_duration = policy.duration_penalty if outside else 0.0

    penalty_short = policy.short_audio_penalty if duration_s < policy.min_duration_s else 0.0

    repeat_fraction = repeated_ngram_fraction(units, policy.repeat_ngram_n)
    penalty_repeat = policy.repeat_penalty * repeat_fraction

    score = base - penalty_empty - penalty_duration - penalty_short - penalty_repeat
    return RewardBreakdown(
        score=min(max(score, 0.0), 1.0),
        base=base,
        error_rate=error_rate,
        error_clipped=clipped,
        penalty_empty=penalty_empty,
        penalty_duration=penalty_duration,
        penalty_short_audio=penalty_short,
        penalty_repeat=penalty_repeat,
        duration_ratio=ratio,
        duration_checked=checked,
        repeated_ngram_fraction=repeat_fraction,
        empty_transcript=empty,
    )


@dataclass(frozen=True)
class ComposedReward:
    """The score once speaker similarity and quality have their share, and each term that made it."""

    score: float
    asr: float
    """The CER reward (formula and penalties) the signals share the score with."""
    speaker_term: float | None
    quality_term: float | None
    speaker_floor_applied: bool
    """Whether the similarity fell below ``speaker_floor`` and zeroed the score."""


def speaker_term(similarity: float) -> float:
    """Cosine similarity (-1..1) as a reward term in [0, 1]."""
    return min(max(similarity, 0.0), 1.0)


def quality_term(mos: float) -> float:
    """A MOS (1..5) as a reward term in [0, 1]."""
    return min(max((mos - MOS_MIN) / (MOS_MAX - MOS_MIN), 0.0), 1.0)


def require_finite(name: str, value: float | None, *, nonnegative: bool = False) -> None:
    """ValueError naming ``name`` unless ``value`` is None or a finite number (``>= 0`` with ``nonnegative``)."""
    if value is not None and (not math.isfinite(value) or (nonnegative and value < 0)):
        raise ValueError(f"{name} must be a finite number{' >= 0' if nonnegative else ''}, got {value!r}")


def compose_reward(
    policy: RewardPolicy, asr_score: float, *, speaker_similarity: float | None, quality_mos: float | None
) -> ComposedReward:
    """``asr_score`` (from :func:`shape_reward`) shared with the speaker and quality terms per ``policy``.

    A signal the policy weighs (or floors) must be given: ValueError otherwise.  A signal given
    with weight 0 is reported as its term and leaves the score alone.
    """
    require_finite("asr_score", asr_score)
    require_finite("speaker_similarity", speaker_similarity)
    require_finite("quality_mos", quality_mos)
    if policy.needs_speaker and speaker_similarity is None:
        raise ValueError("the policy weighs speaker similarity but no similarity was given")
    if policy.quality_weight > 0 and quality_mos is None:
        raise ValueError("the policy weighs quality but no MOS was given")
    t_s = speaker_term(speaker_similarity) if speaker_similarity is not None else None
    t_q = quality_term(quality_mos) if quality_mos is not None else None
    w_s, w_q = policy.speaker_weight, policy.quality_weight
    score = (1.0 - w_s - w_q) * asr_score + w_s * (t_s or 0.0) + w_q * (t_q or 0.0)
    floored = speaker_similarity is not None and speaker_similarity < policy.speaker_floor
    return ComposedReward(
        score=0.0 if floored else min(max(score, 0.0), 1.0),
        asr=asr_score,
        speaker_term=t_s,
        quality_term=t_q,
        speaker_floor_applied=floored,
    )
