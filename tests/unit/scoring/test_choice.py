"""Multiple-choice scoring on real free-text answers, and the trainer's verl adapter over it (no verl needed)."""

from __future__ import annotations

import pytest

from audio_reward.scoring.choice import (
    extract_choice,
    format_ok,
    parse_options,
    score_choice,
)
from audio_reward.trainer_plugin.mcq import compute_score

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
        ("I'd go with (B) here.", "B", "answer_phrase"),
        ("It is (B), the horn.", "B", "parenthesized"),
        ("B. a car horn", "B", "bare_letter"),
        ("A", "A", "bare_letter"),
        ("It sounds like rain on a roof during a storm.", "C", "option_text"),
        # Bracketed letters, as models write them when the prompt lists options as "[A] ...".
        ("My answer: [B]", "B", "answer_phrase"),
        ("The answer is {D}.", "D", "answer_phrase"),
        ("<answer>[C]</answer>", "C", "answer_tag"),
        ("[A] is wrong, so [B].", "B", "parenthesized"),
        ("[B]", "B", "parenthesized"),
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


# What thinking models write, as the policy would answer an AVQA question whose options are OPTIONS.
# Each row: the response, and the option it commits to (None: no credit, whatever the truth).
RESPONSES = [
    # the requested format and close variants
    ("<think>A short, high honk, typical of traffic.</think><answer>B</answer>", "B"),
    ("<think>\nLet me think. The sound repeats... it is rhythmic, like drops.\n</think>\n<answer>C</answer>", "C"),
    ("<think>hmm, notes with a sustain pedal</think> <answer>(D)</answer>", "D"),
    ("<think>barking, for sure</think><answer>A. a dog barking</answer>", "A"),
    ("<answer>b</answer>", "B"),
    ("<think>it is a piano</think><answer>The answer is D.</answer>", "D"),
    ("<think>Wait, is it rain? No, it is a horn.</think><answer>**B**</answer>", "B"),
    # markdown emphasis
    ("**B**", "B"),
    ("The answer is **B**.", "B"),
    ("After listening carefully, the correct answer is ***C***.", "C"),
    ("**Answer:** D", "D"),
    ("Final answer: __A__", "A"),
    ("The sound is a horn, so `B`.", "B"),
    # LaTeX boxes
    (r"\boxed{B}", "B"),
    (r"The sound is periodic and pitched, so the answer is $\boxed{D}$.", "D"),
    (r"Therefore: \boxed{(C)}", "C"),
    (r"\boxed{\text{a dog barking}}", "A"),
    # answer phrases
    ("Answer: (B)", "B"),
    ("Answer: B", "B"),
    ("The answer is (C).", "C"),
    ("Final answer - D", "D"),
    ("I'd go with B.", "B"),
    ("I choose option C because of the steady patter.", "C"),
    ("My pick: the correct option is A.", "A"),
    ("At first I thought A, but listening again the correct answer is B.", "B"),
    ("Option D matches: I hear piano chords.", "D"),
    # ruled-out mentions do not count
    ("C, not option A.", "C"),
    ("Definitely C, not A.", "C"),
    ("B is wrong; the answer is C.", "C"),
    ("Option A is clearly wrong. It is rain, so (C).", "C"),
    ("I would pick D rather than B.", "D"),
    ("Not A. The answer is B.", "B"),
    # the option's text instead of its letter
    ("It is a car horn.", "B"),
    ("It sounds like rain on a roof during a storm.", "C"),
    ("A piano is playing a slow melody.", "D"),
    ("<answer>rain on a roof</answer>", "C"),
    # several different answers: no credit
    ("The answer is A. Actually, the answer is B.", None),
    ("<answer>A</answer> or maybe <answer>C</answer>", None),
    (r"\boxed{A} \boxed{B}", None),
    ("Maybe A or B, hard to tell.", None),
    ("It is a car horn, or a dog barking?", None),
    ("(A) or (D)", None),
    # cut off inside the reasoning (truncated): format failure, no credit
    ("<think>The clip starts with a honk, so the answer is B, but let me also consider", None),
    ("<think>Answer: B. Hmm, wait", None),
    ("<think>first pass</think><think>second pass, the answer is C", None),
    # nothing to read
    ("", None),
    ("I am not sure what this sound is.", None),
    ("a dog", None),  # lower-case article, not option A
    ("<answer>E</answer>", None),  # not an option
    ("<answer></answer>", None),
]


def test_response_table_has_forty_rows() -> None:
    assert len(RESPONSES) >= 40 and len({r for r, _ in RESPONSES}) == len(RESPONSES)


@pytest.mark.parametrize(("response", "letter"), RESPONSES)
def test_reads_what_thinking_models_write(response: str, letter: str | None) -> None:
    assert extract_choice(response, OPTIONS).letter == letter
    for truth in "ABCD":
        result = score_choice(response, truth, OPTIONS)
        assert result["acc"] == float(letter == truth) and result["answered"] == float(letter is not None)


def test_an_unclosed_think_is_a_truncated_response() -> None:
    response = "<think>The honk repeats twice, so the answer is B, unless the second"
    assert extract_choice(response, OPTIONS).method == "truncated"
    result = score_choice(response, "B", OPTIONS, format_weight=0.5)
    assert (result["acc"], result["format_ok"], result["score"]) == (0.0, 0.0, 0.0)


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
