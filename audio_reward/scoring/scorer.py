"""One utterance end to end: normalize both texts, measure errors, shape the reward, share it with the signals."""

from __future__ import annotations

from dataclasses import dataclass

from .duration import estimate_speech_duration
from .errors import EmptyReferenceError
from .metrics import ErrorRates, error_rates
from .normalizers import Normalizer, is_chinese, language_code
from .rewards import ComposedReward, RewardBreakdown, RewardPolicy, compose_reward, require_finite, shape_reward

__all__ = [
    "Diagnostics", "TextComparison", "TranscriptScore", "compare_texts", "normalize_reference", "score_transcript",
]

Diagnostics = dict[str, str | int | float | bool | None]


@dataclass(frozen=True)
class TranscriptScore:
    """Everything known about one scored utterance."""

    transcript: str
    normalized_reference: str
    normalized_transcript: str
    normalizer: str
    language: str | None
    char_level: bool
    rates: ErrorRates
    reward: RewardBreakdown
    policy: RewardPolicy
    duration_s: float
    expected_duration_s: float
    expected_duration_source: str
    composed: ComposedReward | None = None
    """The reward shared with the measured speaker and quality signals; None when none was measured."""

    @property
    def score(self) -> float:
        """The reward, the number the trainer gets: shared with the signals when they were measured."""
        return self.composed.score if self.composed is not None else self.reward.score

    def diagnostics(self) -> Diagnostics:
        """Flat, finite values with the same keys and types for every result that measured the same signals.

        verl takes the extra-info keys of a batch from its first sample, so no key
        is ever optional; an unknown language is reported as ``""``.  The terms the
        signals added (``reward_asr``, ``reward_speaker``, ...) appear only when
        they were measured, so a request that asks for none gets the keys it always got.
        """
        r = self.reward
        return {
            "score": self.score,
            "cer": self.rates.cer,
            "wer": self.rates.wer,
            "error_rate": r.error_rate,
            "error_clipped": r.error_clipped,
            "ref_chars": self.rates.ref_chars,
            "ref_words": self.rates.ref_words,
            "char_edits": self.rates.char_edits,
            "word_edits": self.rates.word_edits,
            "transcript": self.transcript,
            "normalized_transcript": self.normalized_transcript,
            "normalized_reference": self.normalized_reference,
            "normalizer": self.normalizer,
            "language": self.language or "",
            "char_level": self.char_level,
            "duration_s": self.duration_s,
            "expected_duration_s": self.expected_duration_s,
            "expected_duration_source": self.expected_duration_source,
            "duration_ratio": r.duration_ratio,
            "duration_checked": r.duration_checked,
            "reward_formula": self.policy.formula,
            "reward_metric": self.policy.metric,
            "reward_base": r.base,
            "penalty_empty": r.penalty_empty,
            "penalty_duration": r.penalty_duration,
            "penalty_short_audio": r.penalty_short_audio,
            "penalty_repeat": r.penalty_repeat,
            "repeated_ngram_fraction": r.repeated_ngram_fraction,
            "empty_transcript": r.empty_transcript,
            **self._signal_terms(),
        }

    def _signal_terms(self) -> Diagnostics:
        """The terms the measured signals added to the score, and their weights (nothing without signals)."""
        composed, policy = self.composed, self.policy
        if composed is None:
            return {}
        out: Diagnostics = {"reward_asr": composed.asr}
        if composed.speaker_term is not None:
            out.update(reward_speaker=composed.speaker_term, speaker_weight=policy.speaker_weight,
                       speaker_floor_applied=composed.speaker_floor_applied)
        if composed.quality_term is not None:
            out.update(reward_quality=composed.quality_term, quality_weight=policy.quality_weight)
        return out


def normalize_reference(
    reference: str, *, normalizer: Normalizer, language: str | None, field: str = "reference"
) -> tuple[str, bool]:
    """The normalized reference and whether the Chinese (character-level) rules apply.

    ``language`` (code or Whisper name, or None) decides the rules; with None the
    reference itself decides whether Chinese rules apply.  Raises
    :class:`~.errors.UnsupportedLanguageError` for a language the normalizer has
    no rules for, and :class:`~.errors.EmptyReferenceError` when the reference is
    empty or normalizes to nothing (Seed-TTS-eval's scorer raises on such a
    reference; no error rate is defined against nothing).  ``field`` is the
    caller's name for the reference, used in the message.
    """
    if not reference.strip():
        raise EmptyReferenceError(f"{field} is empty: there is no target text to score against", field=field)
    code = language_code(language)
    normalizer.check_language(code)
    char_level = is_chinese(reference, code)
    normalized = normalizer.normalize(reference, code, chinese=char_level, side="reference")
    if not normalized:
        raise EmptyReferenceError(
            f"{field} {_excerpt(reference)} has no words left after {normalizer.name} normalization "
            "(only punctuation or symbols): there is nothing to score against",
            field=field,
        )
    return normalized, char_level


def _excerpt(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


@dataclass(frozen=True)
class TextComparison:
    """Both texts normalized under one set of rules, and their error rates."""

    normalized_reference: str
    normalized_hypothesis: str
    language: str | None
    char_level: bool
    rates: ErrorRates


def compare_texts(reference: str, hypothesis: str, *, normalizer: Normalizer, language: str | None) -> TextComparison:
    """Normalize ``reference`` and ``hypothesis`` (the ASR output) and measure CER/WER.

    The reference decides the rules as in :func:`normalize_reference` (whose
    errors it raises); the hypothesis is normalized as a hypothesis (Seed-TTS-eval
    converts only it to simplified Chinese).
    """
    code = language_code(language)
    normalized_reference, char_level = normalize_reference(reference, normalizer=normalizer, language=code)
    normalized_hypothesis = normalizer.normalize(hypothesis, code, chinese=char_level, side="hypothesis")
    rates = error_rates(normalized_reference, normalized_hypothesis, char_level_language=char_level)
    return TextComparison(normalized_reference, normalized_hypothesis, code, char_level, rates)


def score_transcript(
    reference: str,
    transcript: str,
    *,
    normalizer: Normalizer,
    policy: RewardPolicy,
    language: str | None,
    duration_s: float,
    reference_duration_s: float | None,
    speaker_similarity: float | None = None,
    quality_mos: float | None = None,
) -> TranscriptScore:
    """Score ``transcript`` (the ASR output) against ``reference`` (the target text).

    ``language`` (code or Whisper name, or None) decides the rules for both texts;
    with None, the reference alone decides whether Chinese rules apply, so a
    garbled transcript cannot switch them.  ``duration_s`` is the audio length;
    ``reference_duration_s``, when given and positive, is the expected length,
    otherwise it is estimated from the reference text.  Raises the errors of
    :func:`normalize_reference`.

    ``speaker_similarity`` (the cosine of the speech's and the reference's speaker
    embeddings) and ``quality_mos`` (DNSMOS overall, 1..5) are the signals measured
    for the utterance, None where not measured; when either was, the reward shares
    the score with them per ``policy`` (:func:`~.rewards.compose_reward`, whose
    ValueError it raises).
    """
    require_finite("duration_s", duration_s, nonnegative=True)
    require_finite("reference_duration_s", reference_duration_s, nonnegative=True)

    compared = compare_texts(reference, transcript, normalizer=normalizer, language=language)

    if reference_duration_s:
        expected, source = reference_duration_s, "reference"
    else:
        expected, source = estimate_speech_duration(reference), "estimate"

    reward = shape_reward(
        policy,
        compared.rates.cer if policy.metric == "cer" else compared.rates.wer,
        transcript_normalized=compared.normalized_hypothesis,
        duration_s=duration_s,
        expected_duration_s=expected,
    )
    measured = speaker_similarity is not None or quality_mos is not None
    composed = compose_reward(policy, reward.score, speaker_similarity=speaker_similarity,
                              quality_mos=quality_mos) if measured else None
    return TranscriptScore(
        transcript=transcript,
        normalized_reference=compared.normalized_reference,
        normalized_transcript=compared.normalized_hypothesis,
        normalizer=normalizer.name,
        language=compared.language,
        char_level=compared.char_level,
        rates=compared.rates,
        reward=reward,
        policy=policy,
        duration_s=float(duration_s),
        expected_duration_s=float(expected),
        expected_duration_source=source,
        composed=composed,
    )
