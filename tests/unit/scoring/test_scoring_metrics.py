"""CER/WER: hand-checked values and agreement with jiwer."""

from __future__ import annotations

import random

import jiwer
import pytest

from audio_reward.scoring import ErrorRates, error_rates, split_words


def test_hand_checked_english() -> None:
    # "the cat sat" -> "the cat sit": one word substituted (1/3); chars "a"->"i" (1/11).
    r = error_rates("the cat sat", "the cat sit", char_level_language=False)
    assert r == ErrorRates(cer=1 / 11, wer=1 / 3, ref_chars=11, ref_words=3, char_edits=1, word_edits=1)


def test_hand_checked_insertions_and_deletions() -> None:
    # Deleting "big " costs 4 characters and one word.
    r = error_rates("a big dog", "a dog", char_level_language=False)
    assert (r.char_edits, r.word_edits, r.ref_chars, r.ref_words) == (4, 1, 9, 3)
    assert r.cer == pytest.approx(4 / 9)
    assert r.wer == pytest.approx(1 / 3)


def test_raw_rates_exceed_one_for_looping_hypotheses() -> None:
    r = error_rates("hi", "hi hi hi hi", char_level_language=False)
    assert r.wer == 3.0
    assert r.cer == 9 / 2


def test_whitespace_is_collapsed() -> None:
    assert error_rates("  a   b ", "a b", char_level_language=False).cer == 0.0


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a b c", ["a", "b", "c"]),
        ("", []),
        (" \t\n", []),
        ("a\tb  c ", ["a\tb", "c"]),  # a lone tab is inside a word, as in jiwer
        ("a\u00a0b", ["a\u00a0b"]),
        ("a \u00a0b", ["a", "b"]),  # a run of two whitespace characters is one space
    ],
)
def test_split_words_as_jiwer_does(text: str, words: list[str]) -> None:
    assert split_words(text) == words
    assert split_words(text) == jiwer.transformations.wer_default(text)[0]


def test_char_level_units_ignore_spaces_and_wer_equals_cer() -> None:
    # 你好世界 vs 你好是界: one substitution in four characters.
    r = error_rates("你 好 世 界", "你 好 是 界", char_level_language=True)
    assert r == ErrorRates(cer=0.25, wer=0.25, ref_chars=4, ref_words=4, char_edits=1, word_edits=1)
    assert error_rates("你好世界", "你 好 世 界", char_level_language=True).cer == 0.0


@pytest.mark.parametrize("char_level", [False, True])
def test_empty_reference(char_level: bool) -> None:
    both_empty = error_rates("", "", char_level_language=char_level)
    assert (both_empty.cer, both_empty.wer, both_empty.ref_chars, both_empty.ref_words) == (0.0, 0.0, 0, 0)
    extra = error_rates("", "hello there", char_level_language=char_level)
    assert (extra.cer, extra.wer) == (1.0, 1.0)
    assert extra.char_edits > 0


@pytest.mark.parametrize("char_level", [False, True])
def test_empty_hypothesis_is_all_deletions(char_level: bool) -> None:
    r = error_rates("one two", "", char_level_language=char_level)
    assert r.cer == 1.0 and r.wer == 1.0


def _random_text(rng: random.Random) -> str:
    words = ["a", "ab", "ba", "abc", "cab", "the", "then", "than", "cat", "act", "x"]
    separator = "  " if rng.random() < 0.1 else " "
    return separator.join(rng.choice(words) for _ in range(rng.randint(1, 12)))


def _mutate(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(0, 8)):
        op = rng.random()
        pos = rng.randrange(len(chars) + 1)
        if op < 0.4 and pos < len(chars):
            chars[pos] = rng.choice("abcthenx ")
        elif op < 0.7:
            chars.insert(pos, rng.choice("abcthenx "))
        elif pos < len(chars):
            del chars[pos]
    return "".join(chars)


def test_agrees_with_jiwer_on_random_pairs() -> None:
    rng = random.Random(1234)
    checked = 0
    for _ in range(400):
        ref = _random_text(rng)
        hyp = _mutate(rng, ref) if rng.random() < 0.8 else _random_text(rng)
        ours = error_rates(ref, hyp, char_level_language=False)
        # jiwer 4's cer keeps repeated spaces; ours collapses them (normalized text has none).
        collapsed_ref, collapsed_hyp = " ".join(ref.split()), " ".join(hyp.split())
        assert ours.cer == pytest.approx(jiwer.cer(collapsed_ref, collapsed_hyp), abs=1e-12), (ref, hyp)
        assert ours.wer == pytest.approx(jiwer.wer(ref, hyp), abs=1e-12), (ref, hyp)
        checked += 1
    assert checked == 400


def test_char_level_agrees_with_jiwer_wer_on_spaced_characters() -> None:
    rng = random.Random(99)
    alphabet = "你好世界测试中文语音合成"
    for _ in range(300):
        ref = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20)))
        hyp = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        spaced_ref, spaced_hyp = " ".join(ref), " ".join(hyp)
        ours = error_rates(spaced_ref, spaced_hyp, char_level_language=True)
        assert ours.cer == ours.wer == pytest.approx(jiwer.wer(spaced_ref, spaced_hyp), abs=1e-12)
        assert ours.cer == pytest.approx(jiwer.cer(ref, hyp), abs=1e-12)
