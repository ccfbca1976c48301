"""Normalizer rules, checked against the published rule sets they reproduce."""

from __future__ import annotations

import string

import jiwer
import pytest
import zhconv
from zhon.hanzi import punctuation as zhon_punctuation

from audio_reward.scorer_server.scoring import NORMALIZERS, error_rates, get_normalizer, is_chinese, language_code

SEED = get_normalizer("seed-tts-eval")
WHISPER = get_normalizer("whisper-en")
BASIC = get_normalizer("basic")


def test_registry_names_and_unknown_name() -> None:
    assert NORMALIZERS == ("seed-tts-eval", "whisper-en", "basic")
    for name in NORMALIZERS:
        assert get_normalizer(name).name == name
        assert get_normalizer(name) is get_normalizer(name)
    with pytest.raises(ValueError, match="unknown normalizer 'nope'; available: seed-tts-eval, whisper-en, basic"):
        get_normalizer("nope")


@pytest.mark.parametrize(
    ("language", "code"),
    [("zh-CN", "zh"), ("ZH_tw", "zh"), ("yue", "yue"), ("Chinese", "zh"), ("english", "en"), ("", None), (None, None)],
)
def test_language_code(language: str | None, code: str | None) -> None:
    assert language_code(language) == code


def test_chinese_detection() -> None:
    assert is_chinese("hello", "zh")
    assert is_chinese("你好", "yue")
    assert not is_chinese("你好", "en")
    assert is_chinese("我用iPhone拍照片", None)
    assert not is_chinese("我用 New York Times", None)  # 2 ideographs, 3 other words
    assert not is_chinese("I said 你好 to them", None)
    assert not is_chinese("1234 !!", None)


# --- seed-tts-eval -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World! It's a TEST.", "hello world it's a test"),
        ('He said: "No -- way"; (really?)', "he said no way really"),
        ("  spaced   out  ", "spaced out"),
        ("e-mail @ 5:30 p.m.", "email 530 pm"),
        # zhon's punctuation contains the curly apostrophe; only ASCII "'" survives.
        ("don’t don't", "dont don't"),
    ],
)
def test_seed_english(text: str, expected: str) -> None:
    assert SEED.normalize(text, "en") == expected


def test_seed_chinese_punctuation_removed() -> None:
    text = "你好。世界，测试、问题？对！是；否：「引号」『书名』《书》（括号）【注】〔甲〕…——“好”‘坏’·～"
    out = SEED.normalize(text, "zh")
    assert out == " ".join("你好世界测试问题对是否引号书名书括号注甲好坏")
    assert all(ch not in out for ch in zhon_punctuation)


def test_seed_chinese_traditional_to_simplified_and_characters() -> None:
    assert SEED.normalize("這是測試，對嗎？", "zh") == "这 是 测 试 对 吗"
    # Language not given: mostly-CJK text still gets the Chinese rules.
    assert SEED.normalize("這是 測試", None) == "这 是 测 试"


def test_seed_chinese_keeps_latin_case_like_the_original_scripts() -> None:
    assert SEED.normalize("我用iPhone", "zh") == "我 用 i P h o n e"


def _seed_tts_eval_reference_wer(truth: str, hypo: str, lang: str) -> float:
    """Seed-TTS-eval's run_wer.py process_one, with jiwer.process_words for the removed compute_measures."""
    punctuation_all = zhon_punctuation + string.punctuation
    if lang == "zh":
        hypo = zhconv.convert(hypo, "zh-cn")
    for x in punctuation_all:
        if x == "'":
            continue
        truth = truth.replace(x, "")
        hypo = hypo.replace(x, "")
    truth = truth.replace("  ", " ")
    hypo = hypo.replace("  ", " ")
    if lang == "zh":
        truth = " ".join([x for x in truth])
        hypo = " ".join([x for x in hypo])
    else:
        truth = truth.lower()
        hypo = hypo.lower()
    return jiwer.process_words(truth, hypo).wer


@pytest.mark.parametrize(
    ("truth", "hypo", "lang"),
    [
        ("Hello, world! It's a test.", "hello world its a test", "en"),
        ("The quick brown fox; jumps over: the lazy dog.", "the quick brown fox jumped over the dog", "en"),
        ("We'll meet at the station (platform 9).", "we will meet at the station platform nine", "en"),
        ("Mr. Smith's  car -- red.", "mister smiths car red", "en"),
        ("今天天气很好，我们去公园散步吧！", "今天天氣很好我們去公園散步", "zh"),
        ("「你好」，他说。", "你好他說了", "zh"),
        ("我用iPhone拍了一张照片。", "我用 iphone 拍了一張照片", "zh"),
        ("这是一个测试、仅此而已；谢谢：", "这是测试而已谢谢你", "zh"),
    ],
)
def test_seed_matches_published_pipeline(truth: str, hypo: str, lang: str) -> None:
    ref_n = SEED.normalize(truth, lang)
    hyp_n = SEED.normalize(hypo, lang)
    ours = error_rates(ref_n, hyp_n, char_level_language=lang == "zh").wer
    assert ours == pytest.approx(_seed_tts_eval_reference_wer(truth, hypo, lang), abs=1e-12)


# --- whisper-en ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World.", "hello world"),
        ("I'm gonna colour it twenty-one times", "i am going to color it 21 times"),
        ("Mr. Smith paid $20.5 million in 1999!", "mister smith paid $20500000 in 1999"),
        ("It won't be, uh, a problem.", "it will not be a problem"),
        ("one hundred and two percent", "102%"),
        ("The [inaudible] theatre (sic)", "the theater"),
        ("Hello... wait...", "hello wait"),
        ("It costs 3.5 dollars.", "it costs $3.5"),
    ],
)
def test_whisper_english(text: str, expected: str) -> None:
    assert WHISPER.normalize(text, "en") == expected
    assert WHISPER.normalize(text, None) == expected


def test_whisper_other_languages_use_whisper_basic_rules() -> None:
    # Whisper's BasicTextNormalizer: lower-case, symbols and punctuation to spaces, marks kept.
    assert WHISPER.normalize("¡Hola, Señor! ¿Qué tal?", "es") == "hola señor qué tal"


def test_whisper_chinese_uses_chinese_rules() -> None:
    assert WHISPER.normalize("這是測試，對嗎？", "zh") == "这 是 测 试 对 吗"


# --- basic ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ("Hello, World! It's a TEST.", "en", "hello world its a test"),
        ("ＦＵＬＬ　ｗｉｄｔｈ！１２３", "en", "full width 123"),
        ("Straße", "de", "strasse"),
        ("¡Hola, Señor! ¿Qué tal?", "es", "hola señor qué tal"),
        ("twenty-one", "en", "twenty one"),
        ("Привет, мир!", "ru", "привет мир"),
        ("C'est l’été", "fr", "cest lété"),
        ("\t tabs\nand   newlines \u00a0", None, "tabs and newlines"),
        ("price: 5$ + 3€", "en", "price 5$ + 3€"),
    ],
)
def test_basic(text: str, language: str | None, expected: str) -> None:
    assert BASIC.normalize(text, language) == expected


def test_basic_chinese_full_width_and_traditional() -> None:
    assert BASIC.normalize("這是ＡＢＣ測試！（好）", "zh") == "这 是 a b c 测 试 好"


@pytest.mark.parametrize("name", NORMALIZERS)
def test_forced_rules_override_detection(name: str) -> None:
    normalizer = get_normalizer(name)
    assert normalizer.normalize("你好", None, chinese=False).replace(" ", "") == "你好"
    assert normalizer.normalize("你好", None, chinese=True) == "你 好"
    assert " " not in normalizer.normalize("abc", "zh", chinese=False)


@pytest.mark.parametrize("name", NORMALIZERS)
@pytest.mark.parametrize("text", ["", "   ", "。，！", "...", "\n"])
def test_nothing_speakable_normalizes_to_empty(name: str, text: str) -> None:
    for language in ("en", "zh", None):
        assert get_normalizer(name).normalize(text, language) == ""
