"""Expected speech duration of a text, for the duration-ratio penalty.

Used when a request gives no reference duration.  Rates are typical read-speech
rates per script; the penalty's default band (0.5x to 2x) is wide enough for the
spread between speakers:

* CJK ideographs (Chinese hanzi, Japanese kanji, 〇; the ones
  :func:`~audio_reward.scoring.normalizers.is_cjk_ideograph` names): 4.5
  characters per second (about 270 characters a minute, a common Mandarin
  broadcast rate).
* Japanese kana: 7.5 per second (one mora each).
* Hangul syllable blocks: 6.0 per second.
* Anything else (Latin, Cyrillic, digits, the single spaces between words):
  14 characters per second, which is about 150 English words a minute.

Punctuation and repeated whitespace do not count.
"""

from __future__ import annotations

import unicodedata

from .normalizers import is_cjk_ideograph

__all__ = [
    "HANGUL_PER_SECOND",
    "IDEOGRAPHS_PER_SECOND",
    "KANA_PER_SECOND",
    "OTHER_CHARS_PER_SECOND",
    "estimate_speech_duration",
]

IDEOGRAPHS_PER_SECOND = 4.5
KANA_PER_SECOND = 7.5
HANGUL_PER_SECOND = 6.0
OTHER_CHARS_PER_SECOND = 14.0


def _seconds_for(ch: str) -> float:
    if is_cjk_ideograph(ch):
        return 1.0 / IDEOGRAPHS_PER_SECOND
    cp = ord(ch)
    if 0x3040 <= cp <= 0x30FF:
        return 1.0 / KANA_PER_SECOND
    if 0xAC00 <= cp <= 0xD7A3:
        return 1.0 / HANGUL_PER_SECOND
    return 1.0 / OTHER_CHARS_PER_SECOND


def estimate_speech_duration(text: str) -> float:
    """Seconds a speaker typically takes to read ``text`` aloud (0.0 for no speakable text)."""
    seconds = 0.0
    for word in text.split():
        if units := [ch for ch in word if unicodedata.category(ch)[0] not in "PZC"]:
            if seconds:
                # The space between two words is spoken time too (a short pause).
                seconds += 1.0 / OTHER_CHARS_PER_SECOND
            seconds += sum(_seconds_for(ch) for ch in units)
    return seconds
