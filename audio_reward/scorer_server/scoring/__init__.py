"""Scoring: normalize texts, measure CER/WER, shape the reward.

Pure functions with no model or server state; the server calls
:func:`score_transcript` once per utterance.  See docs/scoring.md.
"""

from .duration import estimate_speech_duration
from .metrics import ErrorRates, error_rates
from .normalizers import NORMALIZERS, Normalizer, get_normalizer, is_chinese, language_code
from .rewards import RewardBreakdown, RewardPolicy, repeated_ngram_fraction, shape_reward
from .scorer import Diagnostics, ScoreResult, score_transcript

__all__ = [
    "NORMALIZERS",
    "Diagnostics",
    "ErrorRates",
    "Normalizer",
    "RewardBreakdown",
    "RewardPolicy",
    "ScoreResult",
    "error_rates",
    "estimate_speech_duration",
    "get_normalizer",
    "is_chinese",
    "language_code",
    "repeated_ngram_fraction",
    "score_transcript",
    "shape_reward",
]
