"""Normalizer rules by example.  Parity with the reference code is in test_seedtts_parity.py
(Seed-TTS-eval, run with jiwer 3) and test_whisper_parity.py (OpenAI's normalisers)."""

from __future__ import annotations

import pytest
from zhon.hanzi import punctuation as zhon_punctuation

from audio_reward.scoring import (
    NORMALIZERS,
    UnsupportedLanguageError,
    get_normalizer,
    is_chinese,
    language_code,
)
from tests.testkit.extras import needs, normalizer_params, normalizers_here

SEED = get_normalizer("seed-tts-eval")
BASIC = get_normalizer("basic")
whisper_en = needs("whisper-en")


def test_registry_names_and_unknown_name() -> None:
    assert NORMALIZERS == ("seed-tts-eval", "whisper-en", "basic")
    for name in normalizers_here():
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


def test_seed_chinese_converts_the_hypothesis_only() -> None:
    assert SEED.normalize("這是測試，對嗎？", "zh", side="hypothesis") == "这 是 测 试 对 吗"
    assert SEED.normalize("這是測試，對嗎？", "zh") == "這 是 測 試 對 嗎"
    # Language not given: mostly-CJK text still gets the Chinese rules.
    assert SEED.normalize("這是 測試", None, side="hypothesis") == "这 是 测 试"


def test_seed_chinese_keeps_latin_case_like_the_original_scripts() -> None:
    assert SEED.normalize("我用iPhone", "zh") == "我 用 i P h o n e"


def test_seed_splits_words_as_jiwer_does() -> None:
    assert SEED.normalize("a\tb  c\u00a0 d", "en") == "a\tb c d"


@pytest.mark.parametrize("language", ["fr", "yue", "ja"])
def test_seed_refuses_other_languages(language: str) -> None:
    with pytest.raises(UnsupportedLanguageError, match=f"not language '{language}'"):
        SEED.normalize("text", language)


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
        ("Hello... wait...", "hello wait ."),  # OpenAI keeps a final "." as a word
        ("It costs 3.5 dollars.", "it costs $3.5"),
    ],
)
@whisper_en
def test_whisper_english(text: str, expected: str) -> None:
    assert get_normalizer("whisper-en").normalize(text, "en") == expected
    assert get_normalizer("whisper-en").normalize(text, None) == expected


@whisper_en
def test_whisper_other_languages_use_whisper_basic_rules() -> None:
    # Whisper's BasicTextNormalizer: lower-case, symbols and punctuation to spaces, marks kept.
    assert get_normalizer("whisper-en").normalize("¡Hola, Señor! ¿Qué tal?", "es") == "hola señor qué tal"


@whisper_en
def test_whisper_chinese_uses_chinese_rules() -> None:
    assert get_normalizer("whisper-en").normalize("這是測試，對嗎？", "zh") == "这 是 测 试 对 吗"


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
        ("zero\u200bwidth soft\u00adhyphen\ufeff", "en", "zerowidth softhyphen"),
    ],
)
def test_basic(text: str, language: str | None, expected: str) -> None:
    assert BASIC.normalize(text, language) == expected


def test_basic_chinese_full_width_and_traditional() -> None:
    assert BASIC.normalize("這是ＡＢＣ測試！（好）", "zh") == "这 是 a b c 测 试 好"


@pytest.mark.parametrize("name", normalizer_params())
def test_forced_rules_override_detection(name: str) -> None:
    normalizer = get_normalizer(name)
    assert normalizer.normalize("你好", None, chinese=False).replace(" ", "") == "你好"
    assert normalizer.normalize("你好", None, chinese=True) == "你 好"
    assert " " not in normalizer.normalize("abc", "zh", chinese=False)


@pytest.mark.parametrize("name", normalizer_params())
@pytest.mark.parametrize("text", ["", "   ", "。，！", "...", "\n"])
def test_nothing_speakable_normalizes_to_empty(name: str, text: str) -> None:
    for language in ("en", "zh", None):
        if name == "whisper-en" and text == "...":
            continue  # OpenAI's rules keep a trailing "." as a word: test_whisper_parity.py
        assert get_normalizer(name).normalize(text, language) == ""
