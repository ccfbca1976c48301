"""Character and word error rates of one normalized (reference, hypothesis) pair.

Definitions (the values of ``jiwer.cer``/``jiwer.wer`` for non-empty
references without repeated spaces, as normalized text always is):

* Words are those of jiwer's default transform (:func:`split_words`): runs of
  two or more whitespace characters become one space, the ends are stripped,
  and the text is split on the space only.
* CER = Levenshtein(ref chars, hyp chars) / len(ref chars), where a text's
  characters are those of its words joined by single spaces (the spaces count
  as characters, as in jiwer).
* WER = Levenshtein(ref words, hyp words) / len(ref words).

For a character-level language (normalized Chinese: characters separated by
spaces) the units are the non-space characters and WER equals CER.

Rates are raw: an insertion-heavy hypothesis (an ASR loop) gives values above 1.
The reward clips them (see ``RewardPolicy.error_clip``).

Empty reference: the rate is 0.0 when the hypothesis is empty too and 1.0
otherwise, so a silent target scores perfectly only with a silent transcript.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rapidfuzz.distance import Levenshtein

__all__ = ["ErrorRates", "error_rates", "split_words"]

_SPACE_RUNS = re.compile(r"\s\s+")


def split_words(text: str) -> list[str]:
    """The words of ``text`` as jiwer's default WER transform makes them (jiwer 3 and 4).

    Runs of two or more whitespace characters become one space, the ends are
    stripped, and the text is split on ``" "`` only: a lone tab or no-break space
    between two words does not separate them (Seed-TTS-eval scores this way).
    """
    words = text.split()
    if " ".join(words) == text:  # the usual case, normalized text: already single-spaced
        return words
    text = _SPACE_RUNS.sub(" ", text).strip()
    return text.split(" ") if text else []


@dataclass(frozen=True)
class ErrorRates:
    """Raw error rates with the counts they are made of."""

    cer: float
    wer: float
    ref_chars: int
    ref_words: int
    char_edits: int
    word_edits: int


def _rate(edits: int, ref_len: int, hyp_len: int) -> float:
    if ref_len == 0:
        return 0.0 if hyp_len == 0 else 1.0
    return edits / ref_len


def error_rates(reference: str, hypothesis: str, *, char_level_language: bool) -> ErrorRates:
    """CER and WER of ``hypothesis`` against ``reference`` (both already normalized)."""
    ref_words = split_words(reference)
    hyp_words = split_words(hypothesis)
    joiner = "" if char_level_language else " "  # character-level: the units are the non-space characters
    ref_chars, hyp_chars = joiner.join(ref_words), joiner.join(hyp_words)
    char_edits = Levenshtein.distance(ref_chars, hyp_chars)
    cer = _rate(char_edits, len(ref_chars), len(hyp_chars))
    if char_level_language:
        return ErrorRates(cer, cer, len(ref_chars), len(ref_chars), char_edits, char_edits)
    word_edits = Levenshtein.distance(ref_words, hyp_words)
    wer = _rate(word_edits, len(ref_words), len(hyp_words))
    return ErrorRates(cer, wer, len(ref_chars), len(ref_words), char_edits, word_edits)
