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
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from audio_reward.protocol import RewardOptions

__all__ = ["RewardBreakdown", "RewardPolicy", "repeated_ngram_fraction", "shape_reward"]

Formula = Literal["1-cer", "exp", "tanh"]
Metric = Literal["cer", "wer"]

FORMULAS: tuple[str, ...] = ("1-cer", "exp", "tanh")
METRICS: tuple[str, ...] = ("cer", "wer")


@dataclass(frozen=True)
class RewardPolicy:
    """How an error rate becomes a reward; the server's defaults, overridable per request."""

    formula: Formula = "1-cer"
    metric: Metric = "cer"
    exp_k: float = 2.5
    error_clip: float = 1.0
    empty_transcript_penalty: float = 0.0
    duration_ratio_min: float = 0.5
    duration_ratio_max: float = 2.0
    duration_penalty: float = 0.0
    min_duration_s: float = 0.5
    short_audio_penalty: float = 0.0
    repeat_ngram_n: int = 4
    repeat_penalty: float = 0.0

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ValueError("invalid reward policy: " + "; ".join(problems))

    def with_options(self, opts: RewardOptions | None) -> RewardPolicy:
        """This policy with the request's set fields applied; ValueError if the result is invalid."""
        if opts is None:
            return self
        overrides = opts.model_dump(exclude_none=True)
        unknown = set(overrides) - set(asdict(self))
        if unknown:
            raise ValueError(f"unknown reward options: {', '.join(sorted(unknown))}")
        return replace(self, **overrides) if overrides else self


def _finite_in(value: float, low: float, high: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high


def _problems(p: RewardPolicy) -> list[str]:
    problems: list[str] = []
    if p.formula not in FORMULAS:
        problems.append(f"formula must be one of {', '.join(FORMULAS)}, got {p.formula!r}")
    if p.metric not in METRICS:
        problems.append(f"metric must be one of {', '.join(METRICS)}, got {p.metric!r}")
    if not _finite_in(p.exp_k, 0.0, math.inf) or p.exp_k <= 0:
        problems.append(f"exp_k must be a finite number > 0, got {p.exp_k!r}")
    if not _finite_in(p.error_clip, 0.0, math.inf) or p.error_clip <= 0:
        problems.append(f"error_clip must be a finite number > 0, got {p.error_clip!r}")
    for field in ("empty_transcript_penalty", "duration_penalty", "short_audio_penalty", "repeat_penalty"):
        value = getattr(p, field)
        if not _finite_in(value, 0.0, 1.0):
            problems.append(f"{field} must be in [0, 1], got {value!r}")
    for field in ("duration_ratio_min", "duration_ratio_max"):
        value = getattr(p, field)
        if not _finite_in(value, 0.0, math.inf) or value <= 0:
            problems.append(f"{field} must be a finite number > 0, got {value!r}")
    if not problems and p.duration_ratio_min >= p.duration_ratio_max:
        problems.append(
            f"duration_ratio_min ({p.duration_ratio_min}) must be less than "
            f"duration_ratio_max ({p.duration_ratio_max})"
        )
    if not _finite_in(p.min_duration_s, 0.0, math.inf):
        problems.append(f"min_duration_s must be a finite number >= 0, got {p.min_duration_s!r}")
    if isinstance(p.repeat_ngram_n, bool) or not isinstance(p.repeat_ngram_n, int) or p.repeat_ngram_n < 1:
        problems.append(f"repeat_ngram_n must be an integer >= 1, got {p.repeat_ngram_n!r}")
    return problems


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
    distinct = len({tuple(units[i : i + n]) for i in range(total)})
    return (total - distinct) / total


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
    if not math.isfinite(error_rate) or error_rate < 0:
        raise ValueError(f"error_rate must be a finite number >= 0, got {error_rate!r}")
    if not math.isfinite(duration_s) or duration_s < 0:
        raise ValueError(f"duration_s must be a finite number >= 0, got {duration_s!r}")
    if not math.isfinite(expected_duration_s) or expected_duration_s < 0:
        raise ValueError(f"expected_duration_s must be a finite number >= 0, got {expected_duration_s!r}")

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
