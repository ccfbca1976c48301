"""``seed-tts-eval`` against the benchmark's own rules, run with the real jiwer 3, zhon and zhconv.

The reference side follows the steps of Seed-TTS-eval's ``run_wer.py``
(github:BytedanceSpeech/seed-tts-eval, commit 752f429): the Chinese ASR output
converted with ``zhconv.convert(text, "zh-cn")``; every character of
``zhon.hanzi.punctuation + string.punctuation`` but the ASCII apostrophe
deleted from both texts; one pass of two spaces to one; Chinese spaced out per
character, English lower-cased; WER from ``jiwer.compute_measures``, which
jiwer 4 removed.  So this file runs in the jiwer 3 environment built by
``scripts/envs/seedtts.sh`` (``scripts/test.sh`` runs it there) and is skipped
in an environment with jiwer 4.
"""

from __future__ import annotations

import string
import warnings

import jiwer
import pytest
import zhconv
from zhon.hanzi import punctuation as zhon_punctuation

from audio_reward.scoring import (
    EmptyReferenceError,
    RewardPolicy,
    ScoringError,
    UnsupportedLanguageError,
    compare_texts,
    get_normalizer,
    score_transcript,
    split_words,
)
from tests.testkit.parity_battery import CASES

pytestmark = pytest.mark.skipif(
    not hasattr(jiwer, "compute_measures"),
    reason="needs jiwer 3.x (compute_measures, removed in jiwer 4): run in .venv-seedtts, see scripts/envs/seedtts.sh",
)

SEED = get_normalizer("seed-tts-eval")


def benchmark_wer(truth: str, hypo: str, lang: str) -> dict:
    """Seed-TTS-eval's per-utterance scoring, on the real libraries; raises as the benchmark does."""
    if lang == "zh":
        hypo = zhconv.convert(hypo, "zh-cn")  # done on the Paraformer transcript before scoring
    for ch in zhon_punctuation + string.punctuation:
        if ch != "'":
            truth = truth.replace(ch, "")
            hypo = hypo.replace(ch, "")
    truth = truth.replace("  ", " ")
    hypo = hypo.replace("  ", " ")
    if lang == "zh":
        truth = " ".join(list(truth))
        hypo = " ".join(list(hypo))
    elif lang == "en":
        truth = truth.lower()
        hypo = hypo.lower()
    else:
        raise NotImplementedError(lang)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # compute_measures is deprecated in 3.x
        return jiwer.compute_measures(truth, hypo)


def _compare(ref: str, hyp: str, lang: str) -> str | None:
    """None when ours equals the benchmark on this case, else what differs."""
    try:
        expected = benchmark_wer(ref, hyp, lang)
    except ValueError:
        expected = None  # the benchmark refuses a reference with no words
    try:
        ours = compare_texts(ref, hyp, normalizer=SEED, language=lang)
    except EmptyReferenceError:
        return None if expected is None else "we refused a reference the benchmark scores"
    if expected is None:
        return "the benchmark raised but we scored"
    problems = []
    if split_words(ours.normalized_reference) != expected["truth"][0]:
        problems.append(f"reference words {ours.normalized_reference!r} vs {expected['truth'][0]!r}")
    if split_words(ours.normalized_hypothesis) != expected["hypothesis"][0]:
        problems.append(f"hypothesis words {ours.normalized_hypothesis!r} vs {expected['hypothesis'][0]!r}")
    if ours.rates.wer != expected["wer"]:
        problems.append(f"wer {ours.rates.wer} vs {expected['wer']}")
    if lang == "zh" and ours.rates.cer != expected["wer"]:
        problems.append(f"Chinese cer {ours.rates.cer} vs the benchmark's wer {expected['wer']}")
    return "; ".join(problems) or None


def test_battery_is_large_and_covers_both_languages() -> None:
    assert len(CASES) >= 300
    assert {lang for _, _, lang in CASES} == {"en", "zh"}


def test_seed_tts_eval_equals_the_benchmark_on_the_whole_battery() -> None:
    mismatches = [(ref, hyp, lang, why) for ref, hyp, lang in CASES if (why := _compare(ref, hyp, lang))]
    assert mismatches == [], f"{len(mismatches)} of {len(CASES)} cases differ, first: {mismatches[:10]}"


def test_the_battery_exercises_refusals_conversions_and_whole_words() -> None:
    # The battery is only evidence if it hits the hard parts: references the benchmark
    # refuses, hypotheses zhconv changes, and words a lone tab or no-break space keeps whole.
    assert sum(_raises(case) for case in CASES) >= 5
    assert sum(lang == "zh" and zhconv.convert(hyp, "zh-cn") != hyp for _, hyp, lang in CASES) >= 15
    words_with_space_inside = [
        word
        for case in CASES
        if not _raises(case)
        for word in benchmark_wer(*case)["truth"][0]
        if any(ch.isspace() for ch in word)
    ]
    assert len(words_with_space_inside) >= 2


def _raises(case: tuple[str, str, str]) -> bool:
    try:
        benchmark_wer(*case)
    except ValueError:
        return True
    return False


# --- the rules one by one, each against the benchmark ----------------------------------


def _wer(ref: str, hyp: str, lang: str) -> tuple[float, float]:
    return compare_texts(ref, hyp, normalizer=SEED, language=lang).rates.wer, benchmark_wer(ref, hyp, lang)["wer"]


def test_only_the_hypothesis_is_converted_to_simplified() -> None:
    # 於 is a valid simplified surname: zhconv would turn it into 于, so the reference stays.
    ours, theirs = _wer("於先生来了", "於先生来了", "zh")
    assert ours == theirs == pytest.approx(1 / 5)
    compared = compare_texts("於先生来了", "於先生来了", normalizer=SEED, language="zh")
    assert compared.normalized_reference == "於 先 生 来 了"


def test_conversion_happens_before_punctuation_is_removed() -> None:
    # zhconv converts phrases: 乾隆 (the emperor) keeps 乾, a comma splits the phrase and 乾 becomes 干.
    assert zhconv.convert("乾隆", "zh-cn") == "乾隆" and zhconv.convert("乾，隆", "zh-cn") == "干，隆"
    assert _wer("乾隆皇帝", "乾，隆皇帝", "zh") == (0.25, 0.25)
    assert _wer("乾隆皇帝", "乾隆皇帝", "zh") == (0.0, 0.0)


def test_a_lone_tab_or_no_break_space_does_not_split_words() -> None:
    # One reference word against two: a substitution and an insertion.
    assert _wer("hello\tworld", "hello world", "en") == (2.0, 2.0)
    assert _wer("hello\u00a0world", "hello world", "en") == (2.0, 2.0)
    assert _wer("hello \u00a0 world", "hello world", "en") == (0.0, 0.0)


def test_curly_apostrophes_are_deleted_the_ascii_one_is_kept() -> None:
    assert SEED.normalize("Don’t stop, it's fine", "en") == "dont stop it's fine"
    assert _wer("Don’t stop", "don't stop", "en") == (0.5, 0.5)


def test_chinese_keeps_latin_case() -> None:
    assert SEED.normalize("我用iPhone", "zh") == "我 用 i P h o n e"
    assert _wer("我用iPhone", "我用iphone", "zh") == (1 / 8, 1 / 8)


def test_score_transcript_uses_the_same_rules() -> None:
    result = score_transcript(
        "旭日东昇。",
        "旭日東昇",
        normalizer=SEED,
        policy=RewardPolicy(),
        language="zh",
        duration_s=1.0,
        reference_duration_s=None,
    )
    assert (result.rates.wer, result.rates.cer) == (benchmark_wer("旭日东昇。", "旭日東昇", "zh")["wer"],) * 2


# --- where the benchmark raises, we refuse with a named error --------------------------


@pytest.mark.parametrize("reference", ["...", "。。。", "— – …", ""])
def test_empty_reference_is_refused_where_the_benchmark_raises(reference: str) -> None:
    lang = "zh" if reference == "。。。" else "en"
    with pytest.raises(ValueError):
        benchmark_wer(reference, "anything", lang)
    with pytest.raises(EmptyReferenceError) as info:
        compare_texts(reference, "anything", normalizer=SEED, language=lang)
    assert info.value.code == "empty_reference" and info.value.field == "reference"


@pytest.mark.parametrize("language", ["fr", "ja", "yue", "de-DE"])
def test_languages_the_benchmark_does_not_score_are_refused(language: str) -> None:
    with pytest.raises(NotImplementedError):
        benchmark_wer("bonjour", "bonjour", language)
    with pytest.raises(UnsupportedLanguageError, match="seed-tts-eval normalizer has rules for en, zh only") as info:
        compare_texts("bonjour", "bonjour", normalizer=SEED, language=language)
    assert isinstance(info.value, ScoringError) and info.value.field == "language"


# --- deliberate difference: no language given ----------------------------------------------


def test_without_a_language_the_reference_picks_chinese_or_english_rules() -> None:
    # run_wer.py always has a language; we accept none and let the reference decide.
    zh = compare_texts("今天天气很好。", "今天天氣很好", normalizer=SEED, language=None)
    assert zh.char_level and zh.rates.wer == benchmark_wer("今天天气很好。", "今天天氣很好", "zh")["wer"]
    en = compare_texts("Hello, World!", "hello world", normalizer=SEED, language=None)
    assert not en.char_level and en.rates.wer == benchmark_wer("Hello, World!", "hello world", "en")["wer"]
