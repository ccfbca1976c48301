"""The multiple-choice reward on real free-text answers (no verl needed)."""

from __future__ import annotations

import pytest

from audio_reward.trainer_plugin.mcq import compute_score, extract_choice, format_ok, parse_options, score_choice

OPTIONS = {"A": "a dog barking", "B": "a car horn", "C": "rain on a roof", "D": "a piano"}


@pytest.mark.parametrize(
    ("response", "letter", "method"),
    [
        ("<think>It is a short honk, typical of traffic.</think><answer>B</answer>", "B", "answer_tag"),
        ("<think>hmm</think>\n<answer> (C) </answer>", "C", "answer_tag"),
        ("<answer>a piano</answer>", "D", "answer_tag"),
        ("The answer is (C).", "C", "answer_phrase"),
        ("Answer: D", "D", "answer_phrase"),
        ("At first I thought A, but listening again the correct answer is B.", "B", "answer_phrase"),
        ("I'd go with (B) here.", "B", "parenthesized"),
        ("B. a car horn", "B", "bare_letter"),
        ("A", "A", "bare_letter"),
        ("It sounds like rain on a roof during a storm.", "C", "option_text"),
    ],
)
def test_extracts_the_chosen_option(response: str, letter: str, method: str) -> None:
    choice = extract_choice(response, OPTIONS)
    assert (choice.letter, choice.method) == (letter, method)


@pytest.mark.parametrize(
    "response",
    [
        "Maybe A or B, hard to tell.",
        "It is a car horn, or a dog barking?",
        "a dog",  # lower-case article, not option A
        "",
        "<answer>E</answer>",  # not an option
    ],
)
def test_ambiguous_or_missing_answers_extract_nothing(response: str) -> None:
    assert extract_choice(response, OPTIONS).letter is None


def test_format_is_reported_separately_from_accuracy() -> None:
    good = "<think>traffic noise</think><answer>B</answer>"
    loose = "Answer: B"
    assert format_ok(good) and not format_ok(loose)
    assert score_choice(good, "B", OPTIONS) == score_choice(good, "B", OPTIONS)
    s_good, s_loose = score_choice(good, "B", OPTIONS), score_choice(loose, "B", OPTIONS)
    assert s_good["acc"] == s_loose["acc"] == 1.0
    assert (s_good["format_ok"], s_loose["format_ok"]) == (1.0, 0.0)
    assert s_good["score"] == s_loose["score"] == 1.0
    weighted = score_choice(loose, "B", OPTIONS, format_weight=0.2)
    assert weighted["score"] == pytest.approx(0.8)


def test_compute_score_reads_options_from_extra_info_as_verl_passes_them() -> None:
    extra_info = {"options": '{"A": "a dog barking", "B": "a car horn", "C": "rain on a roof", "D": "a piano"}'}
    wrong = compute_score("avqa", "<think>x</think><answer>A</answer>", "<answer>B</answer>", extra_info)
    right = compute_score("avqa", "It is clearly a car horn.", "B", extra_info)
    assert (wrong["score"], wrong["acc"], wrong["extracted"]) == (0.0, 0.0, 0.0)
    assert (right["score"], right["extracted"]) == (1.0, 1.0)
    assert set(wrong) == set(right)  # verl takes reward_extra_info keys from the first sample
    assert all(isinstance(v, float) for v in right.values())


def test_options_parse_from_lines_and_reject_garbage() -> None:
    assert parse_options(["A. yes", "B) no"]) == {"A": "yes", "B": "no"}
    with pytest.raises(ValueError, match="not of the form"):
        parse_options(["yes", "no"])
    with pytest.raises(ValueError, match="cannot read an option letter"):
        score_choice("A", "no idea", OPTIONS)
