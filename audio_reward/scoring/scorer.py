"""One utterance end to end: normalize both texts, measure errors, shape the reward, share it with the signals."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from audio_reward.protocol.models import ScoreResponse

from .duration import estimate_speech_duration
from .errors import EmptyReferenceError
from .metrics import ErrorRates, error_rates
from .normalizers import Normalizer, is_chinese, language_code
from .rewards import ComposedReward, RewardBreakdown, RewardPolicy, compose_reward, require_finite, shape_reward

__all__ = [
    "Reference", "TextComparison", "TranscriptScore", "compare_texts", "normalize_reference", "score_transcript",
]


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

    def response(self, *, detected_language: str | None = None, **server: Any) -> ScoreResponse:
        """This score as the protocol's answer, every field typed by :class:`ScoreResponse`.

        The same fields for every result that measured the same signals (verl takes the extra-info keys of
        a batch from its first sample): a field left None is not sent, so the terms the signals added
        (``reward_asr``, ``reward_speaker``, ...) appear only when they were measured.  ``language`` is the
        rules' language, else ``detected_language`` (the ASR model's detection), else ``""``.  ``server``
        sets what only the server knows: ``model``, ``engine``, ``request_id``, the measured signals.
        """
        policy, c = self.policy, self.composed
        speaker = c.speaker_term if c is not None else None
        quality = c.quality_term if c is not None else None
        # The rates, the breakdown's terms and this score's own facts go out under their own names.
        fields = {**asdict(self.rates), **asdict(self.reward), **{name: getattr(self, name) for name in _SENT_AS_IS}}
        fields.update(
            score=self.score, reward_base=fields.pop("base"),
            language=self.language or language_code(detected_language) or "",
            reward_formula=policy.formula, reward_metric=policy.metric, reward_asr=c.asr if c is not None else None,
            reward_speaker=speaker, speaker_weight=None if speaker is None else policy.speaker_weight,
            speaker_floor_applied=None if speaker is None or c is None else c.speaker_floor_applied,
            reward_quality=quality, quality_weight=None if quality is None else policy.quality_weight,
            **server,
        )
        # The response ignores undeclared keys (another server's own diagnostics); ours are each declared, so a
        # field renamed on one side fails here instead of vanishing from every answer.
        return ScoreResponse.model_validate(fields, extra="forbid")


_SENT_AS_IS = ("transcript", "normalized_transcript", "normalized_reference", "normalizer", "char_level", "duration_s",
               "expected_duration_s", "expected_duration_source")


@dataclass(frozen=True)
class Reference:
    """A target text normalized once, under the rules its language chose: what every score against it reads."""

    text: str
    normalized: str
    language: str | None
    """The language code that chose the rules (None: the text itself chose)."""
    char_level: bool
    """Whether the Chinese (character-level) rules apply."""


def normalize_reference(
    reference: str, *, normalizer: Normalizer, language: str | None, field: str = "reference"
) -> Reference:
    """``reference`` normalized, with the rules that apply to it.

    ``language`` (code or Whisper name, or None) decides the rules; with None the
    reference itself decides whether Chinese rules apply.  Raises
    :class:`~.errors.EmptyReferenceError` when the reference is empty or only
    whitespace, or normalizes to nothing (Seed-TTS-eval's scorer raises on such a
    reference; no error rate is defined against nothing), and
    :class:`~.errors.UnsupportedLanguageError` for a language the normalizer has
    no rules for.  ``field`` is the caller's name for the reference, used in the message.
    """
    if not reference.strip():
        raise EmptyReferenceError(f"{field} is empty or only whitespace: no target text to score against", field=field)
    code = language_code(language)
    char_level = is_chinese(reference, code)
    # normalize() refuses a language its rules do not cover (UnsupportedLanguageError) before any work
    normalized = normalizer.normalize(reference, code, chinese=char_level, side="reference")
    if not normalized:
        raise EmptyReferenceError(
            f"{field} {_excerpt(reference)} has no words left after {normalizer.name} normalization "
            "(only punctuation or symbols): there is nothing to score against",
            field=field,
        )
    return Reference(reference, normalized, code, char_level)


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


def compare_texts(reference: str | Reference, hypothesis: str, *, normalizer: Normalizer,
                  language: str | None = None) -> TextComparison:
    """Normalize ``reference`` and ``hypothesis`` (the ASR output) and measure CER/WER.

    A text reference is normalized as in :func:`normalize_reference` under ``language`` (whose errors it
    raises); a :class:`Reference` was normalized already and brings its own rules.  The hypothesis is
    normalized as a hypothesis (Seed-TTS-eval converts only it to simplified Chinese).
    """
    ref = reference if isinstance(reference, Reference) else normalize_reference(
        reference, normalizer=normalizer, language=language)
    hyp = normalizer.normalize(hypothesis, ref.language, chinese=ref.char_level, side="hypothesis")
    rates = error_rates(ref.normalized, hyp, char_level_language=ref.char_level)
    return TextComparison(ref.normalized, hyp, ref.language, ref.char_level, rates)


def score_transcript(
    reference: str | Reference,
    transcript: str,
    *,
    normalizer: Normalizer,
    policy: RewardPolicy,
    language: str | None = None,
    duration_s: float,
    reference_duration_s: float | None,
    speaker_similarity: float | None = None,
    quality_mos: float | None = None,
) -> TranscriptScore:
    """Score ``transcript`` (the ASR output) against ``reference`` (the target text).

    ``language`` (code or Whisper name, or None) decides the rules for both texts
    of a text reference; with None, the reference alone decides whether Chinese
    rules apply, so a garbled transcript cannot switch them.  A :class:`Reference`
    (the server normalizes the prompt once, when it accepts the request) brings its
    own rules.  ``duration_s`` is the audio length; ``reference_duration_s``, when
    given and positive, is the expected length, otherwise it is estimated from the
    reference text.  Raises the errors of :func:`normalize_reference`.

    ``speaker_similarity`` (the cosine of the speech's and the reference's speaker
    embeddings) and ``quality_mos`` (DNSMOS overall, 1..5) are the signals measured
    for the utterance, None where not measured; when either was, the reward shares
    the score with them per ``policy`` (:func:`~.rewards.compose_reward`, whose
    ValueError it raises).
    """
    # duration_s is checked by shape_reward, in the same words; this one it sees only as the expectation.
    require_finite("reference_duration_s", reference_duration_s, nonnegative=True)

    compared = compare_texts(reference, transcript, normalizer=normalizer, language=language)
    text = reference.text if isinstance(reference, Reference) else reference
    expected, source = ((reference_duration_s, "reference") if reference_duration_s
                        else (estimate_speech_duration(text), "estimate"))
    reward = shape_reward(
        policy,
        compared.rates.cer if policy.metric == "cer" else compared.rates.wer,
        transcript_normalized=compared.normalized_hypothesis,
        duration_s=duration_s,
        expected_duration_s=expected,
    )
    composed = (compose_reward(policy, reward.score, speaker_similarity=speaker_similarity, quality_mos=quality_mos)
                if speaker_similarity is not None or quality_mos is not None else None)
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
