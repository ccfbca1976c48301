"""Scoring: normalize texts, measure CER/WER, shape the reward.

Pure functions with no model or server state; the server calls
:func:`score_transcript` once per utterance.  See docs/scoring.md.
"""

from .duration import estimate_speech_duration
from .errors import EmptyReferenceError, ScoringError, UnsupportedLanguageError
from .metrics import ErrorRates, error_rates, split_words
from .normalizers import DEFAULT_NORMALIZER, NORMALIZERS, Normalizer, get_normalizer, is_chinese, language_code
from .rewards import (
    ComposedReward,
    RewardBreakdown,
    RewardPolicy,
    compose_reward,
    repeated_ngram_fraction,
    shape_reward,
)
from .scorer import Reference, TextComparison, TranscriptScore, compare_texts, normalize_reference, score_transcript

__all__ = [
    "DEFAULT_NORMALIZER",
    "NORMALIZERS",
    "ComposedReward",
    "EmptyReferenceError",
    "ErrorRates",
    "Normalizer",
    "Reference",
    "RewardBreakdown",
    "RewardPolicy",
    "ScoringError",
    "TextComparison",
    "TranscriptScore",
    "UnsupportedLanguageError",
    "compare_texts",
    "compose_reward",
    "error_rates",
    "estimate_speech_duration",
    "get_normalizer",
    "is_chinese",
    "language_code",
    "normalize_reference",
    "repeated_ngram_fraction",
    "score_transcript",
    "shape_reward",
    "split_words",
]
