"""``whisper-en`` against OpenAI's own normalisers, from the installed ``openai-whisper`` package.

Reference: ``whisper.normalizers.EnglishTextNormalizer`` and
``BasicTextNormalizer`` (github:openai/whisper, ``whisper/normalizers/``, the
PyPI release installed here).  Every text of the parity battery is normalised
by both; the only difference allowed is the space OpenAI's code can leave at
either end, which we strip (its own test below), and Chinese, which gets our
Chinese rules (also tested below).
"""

from __future__ import annotations

import jiwer
import pytest

from audio_reward.scoring import (
    compare_texts,
    get_normalizer,
    split_words,
)
from tests.testkit.parity_battery import CASES, TEXTS

whisper_normalizers = pytest.importorskip(
    "whisper.normalizers", reason="needs the 'whisper-en' extra: pip install -e '.[whisper-en]'"
)

OPENAI_ENGLISH = whisper_normalizers.EnglishTextNormalizer()
OPENAI_BASIC = whisper_normalizers.BasicTextNormalizer()
WHISPER = get_normalizer("whisper-en")


def test_english_equals_openai_on_every_battery_text() -> None:
    assert len(TEXTS) >= 500
    mismatches = [
        (text, ours, theirs)
        for text in TEXTS
        if (ours := WHISPER.normalize(text, "en", chinese=False)) != (theirs := OPENAI_ENGLISH(text).strip())
    ]
    assert mismatches == [], f"{len(mismatches)} of {len(TEXTS)} texts differ, first: {mismatches[:10]}"


def test_other_languages_equal_openai_basic_on_every_battery_text() -> None:
    mismatches = [
        (text, ours, theirs)
        for text in TEXTS
        if (ours := WHISPER.normalize(text, "fr", chinese=False)) != (theirs := OPENAI_BASIC(text).strip())
    ]
    assert mismatches == [], f"{len(mismatches)} of {len(TEXTS)} texts differ, first: {mismatches[:10]}"


def test_english_wer_equals_jiwer_on_openai_normalised_text() -> None:
    # The Open ASR Leaderboard's figure: jiwer's WER on OpenAI-normalised texts.
    compared = 0
    for ref, hyp, _ in CASES:
        theirs_ref, theirs_hyp = OPENAI_ENGLISH(ref), OPENAI_ENGLISH(hyp)
        if not theirs_ref.strip():
            continue  # jiwer has no WER against nothing; we refuse such a reference (test_scoring_scorer)
        ours = compare_texts(ref, hyp, normalizer=WHISPER, language="en")
        assert ours.rates.wer == jiwer.wer(theirs_ref, theirs_hyp), (ref, hyp)
        compared += 1
    assert compared >= 300


def test_whisper_en_is_openai_not_the_whisper_normalizer_package() -> None:
    # The whisper-normalizer PyPI package adds kinda/sorta/dunno/cause rules that OpenAI's
    # code does not have; "cause" would also rewrite the noun.
    for text in ("the cause of the fire", "I kinda like it", "it's sorta fine", "I dunno", "'cause I said so"):
        assert WHISPER.normalize(text, "en") == OPENAI_ENGLISH(text).strip()
    assert WHISPER.normalize("the cause of the fire", "en") == "the cause of the fire"
    assert WHISPER.normalize("I kinda like it", "en") == "i kinda like it"


def test_a_trailing_dot_stays_a_word_as_in_openai() -> None:
    assert WHISPER.normalize("Hello...", "en") == "hello ."
    assert split_words(WHISPER.normalize("Hello...", "en")) == ["hello", "."]


# --- deliberate differences --------------------------------------------------------------


def test_whisper_en_strips_the_space_openai_leaves_at_the_ends() -> None:
    # OpenAI's code can leave a space at either end ("it%s fine % now%" -> "it s fine now ",
    # and its BasicTextNormalizer "Hello, world!" -> "hello world "); we strip it.  jiwer
    # strips too, so no word and no rate changes.
    assert OPENAI_ENGLISH("it%s fine % now%") == "it s fine now "
    assert WHISPER.normalize("it%s fine % now%", "en") == "it s fine now"
    assert OPENAI_BASIC("Hello, world!") == "hello world "
    assert WHISPER.normalize("Hello, world!", "fr") == "hello world"
    assert jiwer.process_words(OPENAI_ENGLISH("it%s fine % now%"), "it s fine now").wer == 0.0


def test_whisper_en_chinese_uses_our_chinese_rules() -> None:
    # OpenAI's English rules keep a Chinese sentence as one word; the Chinese rules of
    # basic (simplified, one unit per character) make the rate a CER.
    assert OPENAI_ENGLISH("這是測試，對嗎？").strip() == "這是測試 對嗎"
    assert WHISPER.normalize("這是測試，對嗎？", "zh") == "这 是 测 试 对 吗"
