"""score_transcript end to end, diagnostics shape, and the duration estimate."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audio_reward.scoring import (
    EmptyReferenceError,
    RewardPolicy,
    ScoringError,
    estimate_speech_duration,
    get_normalizer,
    normalize_reference,
    score_transcript,
)
from audio_reward.scoring.normalizers import is_cjk_ideograph, is_mostly_cjk
from tests.testkit.extras import needs, normalizer_params, normalizers_here

CASES = [
    # (reference, transcript, language, duration_s, reference_duration_s)
    ("Hello, world! It's a test.", "hello world it's a test", "en", 1.8, None),
    ("The quick brown fox.", "", "en", 1.2, 1.5),
    ("The quick brown fox.", "the the the the the the the the the the the the the", "en", 30.0, None),
    ("今天天气很好，我们去公园散步吧！", "今天天氣很好我們去公園散步", "zh", 3.0, None),
    ("今天天气很好。", "today the weather is nice", None, 0.0, 0.0),
    ("¡Hola, señor!", "hola señor", "es", 0.9, 1.0),
]


def _all_results():
    policy = RewardPolicy(
        empty_transcript_penalty=0.2, duration_penalty=0.2, short_audio_penalty=0.2, repeat_penalty=0.5
    )
    return [
        score_transcript(
            ref, hyp, normalizer=get_normalizer(name), policy=policy, language=lang,
            duration_s=dur, reference_duration_s=ref_dur,
        )
        for name in normalizers_here()
        for ref, hyp, lang, dur, ref_dur in CASES
        if get_normalizer(name).languages is None or lang in get_normalizer(name).languages
    ]


def test_diagnostics_same_keys_and_types_and_finite() -> None:
    results = _all_results()
    first = results[0].response().model_dump(exclude_none=True)
    for result in results:
        diag = result.response().model_dump(exclude_none=True)
        assert list(diag) == list(first)
        for key, value in diag.items():
            assert type(value) is type(first[key]), key
            assert isinstance(value, (str, int, float, bool)), key
            if isinstance(value, float):
                assert math.isfinite(value), key
        assert 0.0 <= diag["score"] <= 1.0
        assert diag["score"] == result.score


def test_exact_match_scores_one() -> None:
    r = score_transcript(
        "Hello, world!", "hello world", normalizer=get_normalizer("seed-tts-eval"), policy=RewardPolicy(),
        language="en", duration_s=1.0, reference_duration_s=None,
    )
    d = r.response().model_dump(exclude_none=True)
    assert (d["score"], d["cer"], d["wer"], d["empty_transcript"]) == (1.0, 0.0, 0.0, False)
    assert d["normalized_reference"] == d["normalized_transcript"] == "hello world"
    assert d["reward_formula"] == "1-cer" and d["reward_metric"] == "cer"
    assert d["expected_duration_source"] == "estimate"
    assert d["expected_duration_s"] == pytest.approx(11 / 14)


def test_chinese_traditional_transcript_against_simplified_target() -> None:
    r = score_transcript(
        "今天天气很好，我们去公园散步吧！", "今天天氣很好我們去公園散步", normalizer=get_normalizer("seed-tts-eval"),
        policy=RewardPolicy(), language="zh", duration_s=3.0, reference_duration_s=None,
    )
    # Only 吧 is missing: 1 of 14 characters.
    assert r.char_level is True
    assert r.rates.cer == r.rates.wer == pytest.approx(1 / 14)
    assert r.score == pytest.approx(13 / 14)


def test_reference_decides_chinese_rules_when_language_unknown() -> None:
    normalizer = get_normalizer("basic")
    zh = score_transcript("今天天气很好。", "今天天气很好", normalizer=normalizer, policy=RewardPolicy(),
                          language=None, duration_s=1.5, reference_duration_s=None)
    assert zh.char_level and zh.score == 1.0
    # A transcript in CJK cannot switch an English target to per-character units.
    en = score_transcript("good morning", "早上好", normalizer=normalizer, policy=RewardPolicy(),
                          language=None, duration_s=1.0, reference_duration_s=None)
    assert not en.char_level
    assert en.normalized_transcript == "早上好"
    assert en.rates.wer == 1.0


def test_metric_wer_and_reference_duration() -> None:
    policy = RewardPolicy(metric="wer", duration_penalty=0.5)
    r = score_transcript("one two three four", "one two tree four", normalizer=get_normalizer("basic"),
                         policy=policy, language="en", duration_s=5.0, reference_duration_s=2.0)
    d = r.response().model_dump(exclude_none=True)
    assert d["error_rate"] == d["wer"] == 0.25
    assert d["expected_duration_source"] == "reference" and d["duration_ratio"] == 2.5
    assert d["penalty_duration"] == 0.5
    assert d["score"] == pytest.approx(0.75 - 0.5)


@needs("whisper-en")
def test_looping_transcript_is_penalized() -> None:
    policy = RewardPolicy(formula="exp", repeat_penalty=0.5, duration_penalty=0.2)
    r = score_transcript("The quick brown fox.", "the " * 60, normalizer=get_normalizer("whisper-en"),
                         policy=policy, language="en", duration_s=30.0, reference_duration_s=None)
    d = r.response().model_dump(exclude_none=True)
    assert d["cer"] > 1.0 and d["error_clipped"] == 1.0
    assert d["repeated_ngram_fraction"] > 0.9
    assert d["penalty_duration"] == 0.2
    assert d["score"] == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"duration_s": math.nan}, "duration_s must be a finite number >= 0"),
        ({"duration_s": -1.0}, "duration_s must be a finite number >= 0"),
        ({"reference_duration_s": math.inf}, "reference_duration_s must be a finite number >= 0"),
    ],
)
def test_bad_durations_rejected(kwargs: dict, message: str) -> None:
    args = {"duration_s": 1.0, "reference_duration_s": None} | kwargs
    with pytest.raises(ValueError, match=message):
        score_transcript("a", "a", normalizer=get_normalizer("basic"), policy=RewardPolicy(), language="en", **args)


@pytest.mark.parametrize("name", normalizer_params())
@pytest.mark.parametrize("reference", ["", "  \t", "。！", "?!", "—"])
def test_a_reference_with_nothing_to_say_is_refused_in_every_mode(name: str, reference: str) -> None:
    with pytest.raises(EmptyReferenceError) as info:
        score_transcript(reference, "some words", normalizer=get_normalizer(name), policy=RewardPolicy(),
                         language=None, duration_s=1.0, reference_duration_s=None)
    assert info.value.code == "empty_reference" and info.value.field == "reference"
    assert "reference" in info.value.message


def test_estimate_speech_duration() -> None:
    assert estimate_speech_duration("") == 0.0
    assert estimate_speech_duration(" ... ！") == 0.0
    # 5 + 1 (space) + 5 characters at 14 per second.
    assert estimate_speech_duration("Hello, world!") == pytest.approx(11 / 14)
    # 9 ideographs at 4.5 per second; punctuation is silent.
    assert estimate_speech_duration("今天天气很好，我们去") == pytest.approx(9 / 4.5)
    assert estimate_speech_duration("ありがとう") == pytest.approx(5 / 7.5)
    assert estimate_speech_duration("안녕하세요") == pytest.approx(5 / 6.0)
    # A typical English sentence: 150 words a minute is 2.5 words a second.
    sentence = "the quick brown fox jumps over the lazy dog and then it runs far away from here"
    words = len(sentence.split())
    assert estimate_speech_duration(sentence) == pytest.approx(words / 2.5, rel=0.25)


def test_ideographic_zero_is_an_ideograph_for_the_duration_and_for_chinese_detection() -> None:
    # One definition of a CJK ideograph serves both: 〇 (read líng) is timed like 二, and makes a text Chinese.
    assert estimate_speech_duration("二〇二四年") == pytest.approx(5 / 4.5)
    assert is_cjk_ideograph("〇") and is_cjk_ideograph("二") and not is_cjk_ideograph("O")
    assert is_mostly_cjk("〇")


_texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(
    reference=_texts,
    transcript=_texts,
    name=st.sampled_from(normalizers_here()),
    language=st.sampled_from([None, "en", "zh", "yue", "es", "ja"]),
    formula=st.sampled_from(["1-cer", "exp", "tanh"]),
    metric=st.sampled_from(["cer", "wer"]),
    duration_s=st.floats(0.0, 600.0),
    reference_duration_s=st.one_of(st.none(), st.floats(0.0, 600.0)),
)
def test_any_text_gives_a_finite_score_in_unit_interval(
    reference: str, transcript: str, name: str, language: str | None, formula: str, metric: str,
    duration_s: float, reference_duration_s: float | None,
) -> None:
    policy = RewardPolicy(
        formula=formula, metric=metric, empty_transcript_penalty=0.3, duration_penalty=0.3,
        short_audio_penalty=0.3, repeat_penalty=0.3,
    )
    try:
        result = score_transcript(
            reference, transcript, normalizer=get_normalizer(name), policy=policy, language=language,
            duration_s=duration_s, reference_duration_s=reference_duration_s,
        )
    except ScoringError as exc:
        # Refused only for a reason it names: nothing to score against, or a language
        # seed-tts-eval has no rules for.
        assert exc.code == "empty_reference" or (name == "seed-tts-eval" and language not in (None, "en", "zh"))
        return
    diag = result.response().model_dump(exclude_none=True)
    assert 0.0 <= diag["score"] <= 1.0
    assert all(math.isfinite(v) for v in diag.values() if isinstance(v, float))
    if result.normalized_reference == result.normalized_transcript:
        assert diag["cer"] == diag["wer"] == 0.0


@pytest.mark.parametrize(("reference", "transcript", "language", "duration_s", "reference_duration_s"), CASES)
def test_a_reference_normalized_once_scores_as_its_text_does(
    reference: str, transcript: str, language: str | None, duration_s: float, reference_duration_s: float | None
) -> None:
    normalizer, policy = get_normalizer("basic"), RewardPolicy(repeat_penalty=0.5)
    prepared = normalize_reference(reference, normalizer=normalizer, language=language, field="prompt")
    args = {"normalizer": normalizer, "policy": policy, "duration_s": duration_s,
            "reference_duration_s": reference_duration_s}
    assert score_transcript(prepared, transcript, **args) == score_transcript(
        reference, transcript, language=language, **args)


def test_the_answer_carries_the_server_fields_and_the_detected_language_only_without_rules() -> None:
    result = score_transcript("guten Morgen", "guten morgen", normalizer=get_normalizer("basic"), policy=RewardPolicy(),
                              language=None, duration_s=1.0, reference_duration_s=None)
    answer = result.response(detected_language="de", model="tiny", request_id="r1")
    assert (answer.language, answer.model, answer.request_id, answer.reward_asr) == ("de", "tiny", "r1", None)
    assert "reward_asr" not in answer.model_dump(exclude_none=True)
    ruled = score_transcript("good morning", "good morning", normalizer=get_normalizer("basic"), policy=RewardPolicy(),
                             language="en", duration_s=1.0, reference_duration_s=None)
    assert ruled.response(detected_language="de").language == "en"
