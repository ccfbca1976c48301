"""Text normalizers applied to both the target text and the ASR transcript.

Three rule sets, chosen by name (see docs/scoring.md for the exact rules):

* ``seed-tts-eval`` is Seed-TTS-eval's ``run_wer.py``, exactly, for English and
  Chinese, so rewards and evals are comparable with published TTS numbers.
* ``whisper-en`` is OpenAI Whisper's ``EnglishTextNormalizer`` (Open ASR
  Leaderboard style), run from the ``openai-whisper`` package itself.
* ``basic`` is our lenient multilingual rule set based on Unicode categories.

Chinese rules (one unit per character) apply when the language is ``zh`` (or
``yue`` outside ``seed-tts-eval``) or, with no language given, when the text is
mostly CJK ideographs.  Normalized Chinese text has its characters separated by
single spaces, so word error rate equals character error rate, as in
Seed-TTS-eval.  Every normalizer returns its words separated by single spaces.
"""

from __future__ import annotations

import re
import string
import unicodedata
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import cache
from typing import Literal

from zhon.hanzi import punctuation as _ZHON_PUNCTUATION

from audio_reward.extras import install_hint

from .errors import UnsupportedLanguageError
from .metrics import split_words

with warnings.catch_warnings():
    # zhconv loads its tables through setuptools' pkg_resources, which warns on import since setuptools 81:
    # a note about zhconv's packaging that no user of audio-reward can act on, printed on every command.
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    import zhconv

__all__ = [
    "CHINESE_LANGUAGES",
    "DEFAULT_NORMALIZER",
    "NORMALIZERS",
    "BasicNormalizer",
    "Normalizer",
    "SeedTTSEvalNormalizer",
    "Side",
    "WhisperEnglishNormalizer",
    "get_normalizer",
    "is_chinese",
    "is_cjk_ideograph",
    "is_mostly_cjk",
    "language_code",
]

CHINESE_LANGUAGES = frozenset({"zh", "yue"})

Side = Literal["reference", "hypothesis"]
"""Which text is normalized: the target text or the ASR transcript (some benchmarks treat them differently)."""

# Whisper reports language names as well as codes; accept the ones that change rules.
_LANGUAGE_NAMES = {"chinese": "zh", "mandarin": "zh", "cantonese": "yue", "english": "en"}


def language_code(language: str | None) -> str | None:
    """Lower-case primary subtag of a BCP-47 tag or Whisper language name (``zh-CN`` -> ``zh``)."""
    if not language:
        return None
    primary = re.split(r"[-_]", language.strip().lower(), maxsplit=1)[0]
    return _LANGUAGE_NAMES.get(primary, primary) or None


def is_cjk_ideograph(ch: str) -> bool:
    """Whether ``ch`` is a CJK ideograph (hanzi, kanji, hanja), including U+3007 IDEOGRAPHIC NUMBER ZERO.

    The one definition of "ideograph" for scoring: Chinese detection here and the
    speech-duration estimate both use it.  U+3007 is read as one syllable (líng)
    like any ideograph, and Chinese writes years with it (二〇二四年).
    """
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF  # CJK Unified Ideographs
        or 0x3400 <= cp <= 0x4DBF  # Extension A
        or 0xF900 <= cp <= 0xFAFF  # Compatibility Ideographs
        or 0x20000 <= cp <= 0x323AF  # Extensions B-H
        or cp == 0x3007  # IDEOGRAPHIC NUMBER ZERO
    )


def is_mostly_cjk(text: str) -> bool:
    """True when CJK ideographs are at least as many as the other words in ``text``.

    An ideograph is about one spoken word, so a Chinese sentence with a brand name
    in Latin letters (``我用iPhone拍照``) still counts as Chinese.
    """
    cjk = sum(map(is_cjk_ideograph, text))
    # Another word is a run of letters that are not ideographs: every other character ends one.
    other_words = len("".join("a" if ch.isalpha() and not is_cjk_ideograph(ch) else " " for ch in text).split())
    return cjk > 0 and cjk >= other_words


def is_chinese(text: str, language: str | None) -> bool:
    """Whether Chinese handling applies: language zh/yue, or no language and mostly CJK text."""
    code = language_code(language)
    return code in CHINESE_LANGUAGES if code is not None else is_mostly_cjk(text)


class Normalizer(ABC):
    """Maps a text to the form compared by the error-rate metrics."""

    name: str
    languages: frozenset[str] | None = None
    """Language codes the rules are defined for; None: every language."""

    def normalize(
        self, text: str, language: str | None, *, chinese: bool | None = None, side: Side = "reference"
    ) -> str:
        """Normalize ``text``; ``language`` is a code or Whisper language name, or None.

        ``chinese`` forces the Chinese rules on or off; None decides from
        ``language``, or from ``text`` itself when no language is given.
        ``side`` says whether ``text`` is the reference or the ASR hypothesis.
        Raises :class:`UnsupportedLanguageError` for a language outside
        :attr:`languages`.
        """
        code = language_code(language)
        self.check_language(code)
        return self._normalize(text, code, is_chinese(text, code) if chinese is None else chinese, side)

    def check_language(self, code: str | None) -> None:
        """Raise :class:`UnsupportedLanguageError` when the rules do not cover language ``code``."""
        if code is not None and self.languages is not None and code not in self.languages:
            raise UnsupportedLanguageError(
                f"the {self.name} normalizer has rules for {', '.join(sorted(self.languages))} only, "
                f"not language {code!r}; the basic and whisper-en normalizers take any language",
                field="language",
            )

    @abstractmethod
    def _normalize(self, text: str, code: str | None, chinese: bool, side: Side) -> str:
        """Rules proper, with the language resolved to a primary code."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class SeedTTSEvalNormalizer(Normalizer):
    """Seed-TTS-eval's ``run_wer.py`` rules, English and Chinese.

    Every character of ``zhon.hanzi.punctuation`` and ``string.punctuation`` is
    deleted except the ASCII apostrophe.  English: lower-cased.  Chinese: the
    hypothesis alone is first converted to simplified (before punctuation is
    deleted: ``zhconv`` converts phrase by phrase), then every character is a
    unit; nothing is lower-cased.  Words are split as jiwer 3's
    ``compute_measures`` splits them (:func:`split_words`), so a lone tab or
    no-break space does not separate two words.
    """

    name = "seed-tts-eval"
    languages = frozenset({"en", "zh"})

    _DELETE = str.maketrans("", "", "".join(sorted(set(string.punctuation + _ZHON_PUNCTUATION) - {"'"})))

    def _normalize(self, text: str, code: str | None, chinese: bool, side: Side) -> str:
        # The benchmark's one pass of "  " -> " " is left out: split_words collapses
        # every run of spaces anyway, so it never changes a word.
        if chinese:
            if side == "hypothesis":
                # Only the ASR output is converted: zhconv also rewrites valid simplified
                # characters (昇, 於, 馀), so the benchmark leaves its references alone.
                text = zhconv.convert(text, "zh-cn")
            text = " ".join(text.translate(self._DELETE))
        else:
            text = text.translate(self._DELETE).lower()
        return " ".join(split_words(text))


# Invisible format characters that carry no sound: zero-width space, word joiner,
# byte-order mark, soft hyphen.  (ZWJ and ZWNJ are kept: they change how some
# scripts are written.)
_INVISIBLE = str.maketrans("", "", "\u200b\u2060\ufeff\u00ad")


def _basic_chinese(text: str) -> str:
    """Chinese handling shared by ``basic`` and ``whisper-en``: both sides simplified."""
    text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE)
    text = zhconv.convert(text, "zh-cn").casefold()
    # One unit per character, punctuation dropped, separated by single spaces.
    return " ".join(ch for ch in text if not ch.isspace() and unicodedata.category(ch)[0] != "P")


class BasicNormalizer(Normalizer):
    """Lenient multilingual rules by Unicode category.

    NFKC (folds full-width forms to half-width), invisible format characters
    (zero-width space, soft hyphen) deleted, casefold, apostrophes inside words
    dropped (``don't`` -> ``dont``), every other punctuation character (category
    ``P*``) replaced by a space, whitespace collapsed.  Symbols, digits and
    combining marks are kept.
    """

    name = "basic"

    _APOSTROPHES = str.maketrans("", "", "'\u2019\u02bc\uff07")

    def _normalize(self, text: str, code: str | None, chinese: bool, side: Side) -> str:
        if chinese:
            return _basic_chinese(text)
        text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).casefold().translate(self._APOSTROPHES)
        return " ".join("".join(" " if unicodedata.category(ch)[0] == "P" else ch for ch in text).split())


class WhisperEnglishNormalizer(Normalizer):
    """OpenAI Whisper's ``EnglishTextNormalizer``, from the ``openai-whisper`` package.

    English (or no language): OpenAI's English rules, which spell out
    contractions, standardize numbers and currency, map British to American
    spelling and drop filler words.  Other languages: OpenAI's
    ``BasicTextNormalizer``, as the Open ASR Leaderboard does for non-English
    sets.  Chinese: the ``basic`` Chinese rules.  OpenAI's output can start or
    end with a space (``"Hello."`` -> ``"hello "``); it is stripped, which changes
    no word.
    """

    name = "whisper-en"

    def __init__(self) -> None:
        # Imported here, not at module level: ``whisper``'s package import loads
        # torch and numba (about a second), paid once when the normalizer is built.
        try:
            from whisper.normalizers import BasicTextNormalizer, EnglishTextNormalizer
        except ImportError as exc:
            raise ImportError(
                "the whisper-en normalizer runs OpenAI's own code from the openai-whisper package: "
                + install_hint("whisper-en")
            ) from exc

        # openai-whisper ships no type information; both normalizers map a string to a string.
        self._english: Callable[[str], str] = EnglishTextNormalizer()
        self._basic: Callable[[str], str] = BasicTextNormalizer()

    def _normalize(self, text: str, code: str | None, chinese: bool, side: Side) -> str:
        if chinese:
            return _basic_chinese(text)
        return (self._english if code is None or code == "en" else self._basic)(text).strip()


_FACTORIES: dict[str, type[Normalizer]] = {
    cls.name: cls for cls in (SeedTTSEvalNormalizer, WhisperEnglishNormalizer, BasicNormalizer)
}

NORMALIZERS: tuple[str, ...] = tuple(_FACTORIES)

DEFAULT_NORMALIZER = "basic"
"""The normaliser the server and ``audio-reward error-rate`` use unless told otherwise."""


@cache
def get_normalizer(name: str) -> Normalizer:
    """The shared normalizer instance called ``name``; ValueError for an unknown name."""
    if name not in _FACTORIES:
        raise ValueError(f"unknown normalizer {name!r}; available: {', '.join(NORMALIZERS)}")
    return _FACTORIES[name]()
