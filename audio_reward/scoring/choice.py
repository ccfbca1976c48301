"""Multiple-choice scoring for audio question answering (AVQA-style): which option a free-text answer chose.

The policy answers in free text, and thinking models write it in many ways;
:func:`extract_choice` finds the option it chose: an ``<answer>`` tag,
``\\boxed{B}``, "Answer: (B)", "The answer is **B**." (markdown emphasis is
read through), "I'd go with B", a lone "(B)", a bare "B." line, or the text of
exactly one option.  Mentions the response rules out ("C, not option A",
"B is wrong", "rather than D") do not count.  A response that commits to
several different options gets no credit, and so does one cut off inside its
``<think>`` block (a truncated response: the reasoning never reached an
answer).  Whether the response followed the requested
``<think>…</think><answer>X</answer>`` format is reported separately
(``format_ok``) and only counts toward the score when a ``format_weight`` is
given.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_LETTERS = "ABCDEFGH"

_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK_RE = re.compile(r"<think>(?!.*</think>)", re.DOTALL | re.IGNORECASE)
_ANSWER_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_FORMAT_RE = re.compile(
    r"^\s*(?:<think>(?:(?!</?think>).)*</think>\s*)?<answer>\s*\(?([A-Za-z])\)?\s*</answer>\s*$",
    re.DOTALL | re.IGNORECASE,
)
_EMPHASIS_RE = re.compile(r"(\*\*|__|\*|`)(.+?)\1", re.DOTALL)
_BOXED_RE = re.compile(r"\\boxed\s*\{\s*(?:\\text\s*\{)?\s*([^{}]*?)\s*\}?\s*\}")
# A letter, bare or in brackets: "B", "(B)", "[B]", "{B}".
_OPEN, _CLOSE = r"[(\[{]", r"[)\]}]"
_LETTER = _OPEN + r"?\b([A-Z])\b" + _CLOSE + "?"
# "Answer: B", "the correct answer is (B)", "Final answer - B", "option B", "I'd go with B" …
_PHRASE_RE = re.compile(
    r"(?i:\b(?:(?:final\s+|correct\s+|best\s+)?(?:answer|option|choice)\b(?:\s+(?:is|would\s+be|should\s+be|must\s+be))?"
    r"|(?:choose|chose|pick|picked|select|go\s+with|going\s+with|definitely|clearly|certainly|surely)"
    r"(?:\s+(?:option|choice))?)\s*[:\-=]?\s*)" + _LETTER
)
# "…, so B." / "Therefore (C)": a conclusion that ends its sentence
_CONCLUSION_RE = re.compile(
    r"(?i:\b(?:so|thus|therefore|hence)\b,?\s+(?:it'?s\s+|it\s+is\s+)?)"
    r"\(?([A-Z])\)?(?=\s*[.!]?\s*$)",
    re.MULTILINE,
)
# Mentions a response rules out: "not (option) A", "rather than A", "A is wrong" …
_NEGATED_RE = re.compile(
    r"(?i:\b(?:not|rather\s+than|instead\s+of|excluding|except|eliminat\w*|rul\w*\s+out)\s+(?:(?:option|choice|answer)\s+)?)"
    + _LETTER
    + r"|(?i:\b(?:option|choice)\s+)?" + _LETTER
    + r"(?i:\s+(?:is|seems|sounds|looks|was)\s+(?:(?:clearly|definitely|also)\s+)?"
    r"(?:wrong|incorrect|unlikely|not\b|ruled\s+out))"
)
_PAREN_RE = re.compile(_OPEN + r"([A-Z])" + _CLOSE)
_BARE_RE = re.compile(r"^\s*" + _OPEN + r"?([A-Za-z])" + _CLOSE + r"?\s*(?:[.):,]\s*(.*))?$", re.DOTALL)
_OPTION_LINE_RE = re.compile(r"^\s*\(?([A-Za-z])\)?\s*[.):、]\s*(.+?)\s*$")
_PUNCT = str.maketrans(dict.fromkeys(string.punctuation, " "))


@dataclass(frozen=True)
class Choice:
    """The option a response chose, and how it was found (``none`` when it was not)."""

    letter: str | None
    method: str


def parse_options(options: Any) -> dict[str, str]:
    """Options as ``{letter: text}`` from a mapping, its JSON text, or "A. text" lines.

    Raises :class:`ValueError` on anything else, so a malformed dataset row is
    reported rather than scored against no options.
    """
    if options is None:
        return {}
    if isinstance(options, str):  # blank text is no lines, so no options
        options = options.strip()
        options = json.loads(options) if options.startswith("{") else options.splitlines()
    if isinstance(options, Mapping):
        return {str(k).strip().upper(): str(v).strip() for k, v in options.items()}
    try:
        lines = list(options)
    except TypeError:
        raise ValueError(
            f"options must be a mapping, JSON object or list of 'A. text' lines, got {type(options).__name__}"
        ) from None
    parsed: dict[str, str] = {}
    for line in lines:
        match = _OPTION_LINE_RE.match(str(line))
        if match is None:
            raise ValueError(f"option line {line!r} is not of the form 'A. text'")
        parsed[match.group(1).upper()] = match.group(2)
    return parsed


def _normalize(text: str) -> str:
    return " ".join(text.lower().translate(_PUNCT).split())


def _by_option_text(text: str, options: Mapping[str, str]) -> str | None:
    norm = f" {_normalize(text)} "
    hits = {letter for letter, body in options.items() if _normalize(body) and f" {_normalize(body)} " in norm}
    # An option whose text contains another's ("red car" vs "car") wins over it.
    hits = {h for h in hits if not any(h != o and _normalize(options[h]) in _normalize(options[o]) for o in hits)}
    return hits.pop() if len(hits) == 1 else None


def _plain(text: str) -> str:
    """``text`` with markdown emphasis removed and ruled-out mentions blanked."""
    previous = None
    while previous != text:  # nested emphasis (***B***)
        previous, text = text, _EMPHASIS_RE.sub(r"\2", text)
    return _NEGATED_RE.sub(" ", text)


def _from_text(text: str, valid: str, options: Mapping[str, str] | None) -> Choice:
    """The one option ``text`` commits to; several different ones, or none, give ``Choice(None, ...)``."""
    if boxed := _BOXED_RE.findall(text):
        letters = {m.group(1).upper() for m in map(_BARE_RE.match, boxed) if m and m.group(1).upper() in valid}
        if not letters and options:
            letters = {x for x in (_by_option_text(b, options) for b in boxed) if x}
        return Choice(letters.pop(), "boxed") if len(letters) == 1 else Choice(None, "none")
    body = _plain(text)
    if phrases := {m for m in _PHRASE_RE.findall(body) + _CONCLUSION_RE.findall(body) if m in valid}:
        return Choice(phrases.pop(), "answer_phrase") if len(phrases) == 1 else Choice(None, "none")
    parenthesized = {m for m in _PAREN_RE.findall(body) if m in valid}
    if len(parenthesized) == 1:
        return Choice(parenthesized.pop(), "parenthesized")
    bare = _BARE_RE.match(body.strip().splitlines()[0] if body.strip() else "")
    if bare and bare.group(1).isupper() and bare.group(1) in valid:
        # "B. a car horn" or "C, not option A": the rest must not name another option
        rest = bare.group(2) or ""
        others = {m for m in _PHRASE_RE.findall(rest) + _PAREN_RE.findall(rest) if m in valid} - {bare.group(1)}
        return Choice(bare.group(1), "bare_letter") if not others else Choice(None, "none")
    letter = _by_option_text(body, options) if options else None
    return Choice(letter, "option_text") if letter else Choice(None, "none")


def _tag_letter(tag: str, valid: str, options: Mapping[str, str] | None) -> str | None:
    bare = _BARE_RE.match(_plain(tag))
    if bare and bare.group(1).upper() in valid and not (bare.group(2) or "").strip(" ."):
        return bare.group(1).upper()  # <answer>b</answer>: inside the tag any case is the letter
    return _from_text(tag, valid, options).letter


def extract_choice(response: str, options: Mapping[str, str] | None = None) -> Choice:
    """Find the option letter ``response`` commits to; ambiguous answers give ``Choice(None, "none")``.

    A ``<think>`` block that never closes (the response was cut off while
    reasoning) gives ``Choice(None, "truncated")``.
    """
    valid = "".join(sorted(options)) if options else DEFAULT_LETTERS
    body = _THINK_RE.sub(" ", response)
    if _OPEN_THINK_RE.search(body):
        return Choice(None, "truncated")
    if tags := _ANSWER_TAG_RE.findall(body):
        choices = {_tag_letter(tag, valid, options) for tag in tags}
        letter = choices.pop() if len(choices) == 1 else None
        return Choice(letter, "answer_tag") if letter else Choice(None, "none")
    return _from_text(body, valid, options)


def format_ok(response: str) -> bool:
    """True when the response is ``[<think>…</think>] <answer>X</answer>`` and nothing else."""
    return _FORMAT_RE.match(response) is not None


def ground_truth_letter(ground_truth: Any, options: Mapping[str, str] | None = None) -> str:
    """The correct letter from "B", "<answer>B</answer>", "(B)" or the option's text."""
    choice = extract_choice(str(ground_truth), options)
    if choice.letter is None:
        raise ValueError(f"cannot read an option letter from ground truth {ground_truth!r}")
    return choice.letter


EXTRACTION_METHODS = ("none", "answer_tag", "answer_phrase", "parenthesized", "bare_letter", "option_text", "boxed",
                      "truncated")


def score_choice(
    response: str, ground_truth: Any, options: Any = None, *, format_weight: float = 0.0
) -> dict[str, float]:
    """Score one response: ``score = (1-w)·acc + w·format_ok`` with every diagnostic numeric.

    ``extracted`` is the chosen option's index (A=0, -1 when none was found),
    ``extraction`` the index of the method in :data:`EXTRACTION_METHODS`; both
    numeric so verl can average them like every other ``reward_extra_info`` key.
    """
    if not 0.0 <= format_weight <= 1.0:
        raise ValueError(f"format_weight must be in [0, 1], got {format_weight}")
    opts = parse_options(options)
    truth = ground_truth_letter(ground_truth, opts or None)
    choice = extract_choice(response, opts or None)
    acc = float(choice.letter == truth)
    fmt = float(format_ok(response))
    return {
        "score": (1.0 - format_weight) * acc + format_weight * fmt,
        "acc": acc,
        "format_ok": fmt,
        "answered": float(choice.letter is not None),
        "extracted": float(ord(choice.letter) - ord("A")) if choice.letter else -1.0,
        "extraction": float(EXTRACTION_METHODS.index(choice.method)),
    }
