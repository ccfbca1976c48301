"""Text normalizers applied to both the target text and the ASR transcript.

Three rule sets, chosen by name (see docs/scoring.md for the exact rules):

* ``seed-tts-eval`` reproduces the Seed-TTS-eval scripts, so rewards and evals are
  comparable with published TTS intelligibility numbers.
* ``whisper-en`` is Whisper's ``EnglishTextNormalizer`` (Open ASR Leaderboard style).
* ``basic`` is a lenient multilingual rule set based on Unicode categories.

Chinese handling (traditional to simplified, Chinese punctuation, one unit per
character) applies when the language is ``zh``/``yue`` or, with no language given,
when the text is mostly CJK ideographs.  Normalized Chinese text has its
characters separated by single spaces, so word error rate equals character error
rate, as in Seed-TTS-eval.
"""

from __future__ import annotations

import re
import string
import unicodedata
from abc import ABC, abstractmethod
from functools import lru_cache

import zhconv
from zhon.hanzi import punctuation as _ZHON_PUNCTUATION

__all__ = [
    "CHINESE_LANGUAGES",
    "NORMALIZERS",
    "Normalizer",
    "SeedTTSEvalNormalizer",
    "WhisperEnglishNormalizer",
    "BasicNormalizer",
    "get_normalizer",
    "is_chinese",
    "is_mostly_cjk",
    "language_code",
]

CHINESE_LANGUAGES = frozenset({"zh", "yue"})

# Whisper reports language names as well as codes; accept the ones that change rules.
_LANGUAGE_NAMES = {"chinese": "zh", "mandarin": "zh", "cantonese": "yue", "english": "en"}

_WHITESPACE = re.compile(r"\s+")


def language_code(language: str | None) -> str | None:
    """Lower-case primary subtag of a BCP-47 tag or Whisper language name (``zh-CN`` -> ``zh``)."""
    if not language:
        return None
    primary = re.split(r"[-_]", language.strip().lower(), maxsplit=1)[0]
    return _LANGUAGE_NAMES.get(primary, primary) or None


def _is_cjk_ideograph(ch: str) -> bool:
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF  # CJK Unified Ideographs
        or 0x3400 <= cp <= 0x4DBF  # Extension A
        or 0xF900 <= cp <= 0xFAFF  # Compatibility Ideographs
        or 0x20000 <= cp <= 0x323AF  # Extensions B-H
        or cp == 0x3007  # 〇
    )


def is_mostly_cjk(text: str) -> bool:
    """True when CJK ideographs are at least as many as the other words in ``text``.

    An ideograph is about one spoken word, so a Chinese sentence with a brand name
    in Latin letters (``我用iPhone拍照``) still counts as Chinese.
    """
    cjk = 0
    other_words = 0
    in_word = False
    for ch in text:
        if _is_cjk_ideograph(ch):
            cjk += 1
            in_word = False
        elif ch.isalpha():
            other_words += not in_word
            in_word = True
        else:
            in_word = False
    return cjk > 0 and cjk >= other_words


def is_chinese(text: str, language: str | None) -> bool:
    """Whether Chinese handling applies: language zh/yue, or no language and mostly CJK text."""
    code = language_code(language)
    if code is not None:
        return code in CHINESE_LANGUAGES
    return is_mostly_cjk(text)


def _collapse(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _per_character(text: str) -> str:
    """One unit per non-space character, separated by single spaces."""
    return " ".join(ch for ch in text if not ch.isspace())


class Normalizer(ABC):
    """Maps a text to the form compared by the error-rate metrics."""

    name: str

    def normalize(self, text: str, language: str | None, *, chinese: bool | None = None) -> str:
        """Normalize ``text``; ``language`` is a code or Whisper language name, or None.

        ``chinese`` forces the Chinese rules on or off; None decides from
        ``language``, or from ``text`` itself when no language is given.
        """
        if chinese is None:
            chinese = is_chinese(text, language)
        return self._normalize(text, language_code(language), chinese)

    @abstractmethod
    def _normalize(self, text: str, code: str | None, chinese: bool) -> str:
        """Rules proper, with the language resolved to a primary code."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class SeedTTSEvalNormalizer(Normalizer):
    """Seed-TTS-eval's ``run_wer.py`` rules.

    Removes every character of ``string.punctuation`` and ``zhon.hanzi.punctuation``
    except the ASCII apostrophe.  English: lower-cased.  Chinese: converted to
    simplified (Seed-TTS-eval converts the hypothesis; its references are already
    simplified) and split into characters; Latin letters in Chinese text keep their
    case, as in the original scripts.
    """

    name = "seed-tts-eval"

    _DELETE = str.maketrans("", "", "".join(sorted(set(string.punctuation + _ZHON_PUNCTUATION) - {"'"})))

    def _normalize(self, text: str, code: str | None, chinese: bool) -> str:
        stripped = text.translate(self._DELETE)
        if chinese:
            return _per_character(zhconv.convert(stripped, "zh-cn"))
        return _collapse(stripped.lower())


def _basic_chinese(text: str) -> str:
    """Chinese handling shared by ``basic`` and ``whisper-en``."""
    text = zhconv.convert(unicodedata.normalize("NFKC", text), "zh-cn").casefold()
    kept = "".join(" " if unicodedata.category(ch)[0] == "P" else ch for ch in text)
    return _per_character(kept)


class BasicNormalizer(Normalizer):
    """Lenient multilingual rules by Unicode category.

    NFKC (folds full-width forms to half-width), casefold, apostrophes inside words
    dropped (``don't`` -> ``dont``), every other punctuation character (category
    ``P*``) replaced by a space, whitespace collapsed.  Symbols, digits and
    combining marks are kept.
    """

    name = "basic"

    _APOSTROPHES = str.maketrans("", "", "'\u2019\u02bc\uff07")

    def _normalize(self, text: str, code: str | None, chinese: bool) -> str:
        if chinese:
            return _basic_chinese(text)
        text = unicodedata.normalize("NFKC", text).casefold().translate(self._APOSTROPHES)
        return _collapse("".join(" " if unicodedata.category(ch)[0] == "P" else ch for ch in text))


class WhisperEnglishNormalizer(Normalizer):
    """Whisper's ``EnglishTextNormalizer`` (from the ``whisper-normalizer`` package).

    English (or no language): Whisper's English rules, which spell out contractions,
    standardize numbers and currency, map British to American spelling and drop
    filler words; a stray ``.`` token that Whisper's rules leave from an ellipsis
    (``Hello...`` -> ``hello .``) is dropped so it does not count as a word.
    Chinese: the ``basic`` Chinese rules.  Other languages: Whisper's
    ``BasicTextNormalizer``, as the Open ASR Leaderboard does for non-English sets.
    """

    name = "whisper-en"

    def __init__(self) -> None:
        # Imported here: building the English normalizer reads its spelling map.
        from whisper_normalizer.basic import BasicTextNormalizer
        from whisper_normalizer.english import EnglishTextNormalizer

        self._english = EnglishTextNormalizer()
        self._basic = BasicTextNormalizer()

    def _normalize(self, text: str, code: str | None, chinese: bool) -> str:
        if chinese:
            return _basic_chinese(text)
        if code is None or code == "en":
            return " ".join(w for w in self._english(text).split() if w.strip("."))
        return _collapse(self._basic(text))


_FACTORIES: dict[str, type[Normalizer]] = {
    SeedTTSEvalNormalizer.name: SeedTTSEvalNormalizer,
    WhisperEnglishNormalizer.name: WhisperEnglishNormalizer,
    BasicNormalizer.name: BasicNormalizer,
}

NORMALIZERS: tuple[str, ...] = tuple(_FACTORIES)


@lru_cache(maxsize=None)
def get_normalizer(name: str) -> Normalizer:
    """The shared normalizer instance called ``name``; ValueError for an unknown name."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown normalizer {name!r}; available: {', '.join(NORMALIZERS)}") from None
    return factory()
