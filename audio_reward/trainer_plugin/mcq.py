"""Multiple-choice reward for audio question answering (AVQA-style).

The policy answers in free text; :func:`extract_choice` finds the option it
chose: an ``<answer>`` tag, "Answer: B", "the answer is (B)", a lone "(B)",
a bare "B." line, or the text of exactly one option.  Whether the response
followed the requested ``<think>…</think><answer>X</answer>`` format is
reported separately (``format_ok``) and only counts toward the score when a
``format_weight`` is given.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass
from typing import Any, Mapping

DEFAULT_LETTERS = "ABCDEFGH"

_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_ANSWER_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_FORMAT_RE = re.compile(
    r"^\s*(?:<think>(?:(?!</?think>).)*</think>\s*)?<answer>\s*\(?([A-Za-z])\)?\s*</answer>\s*$",
    re.DOTALL | re.IGNORECASE,
)
# "Answer: B", "the correct answer is (B)", "Final answer - B", "option B" …
_PHRASE_RE = re.compile(
    r"(?i:\b(?:final\s+|correct\s+)?(?:answer|option|choice)\b(?:\s+(?:is|would\s+be|should\s+be))?\s*[:\-=]?\s*)"
    r"\(?\b([A-Z])\b\)?"
)
_PAREN_RE = re.compile(r"\(([A-Z])\)")
_BARE_RE = re.compile(r"^\s*\(?([A-Za-z])\)?\s*(?:[.):]\s*(.*))?$", re.DOTALL)
_OPTION_LINE_RE = re.compile(r"^\s*\(?([A-Za-z])\)?\s*[.):、]\s*(.+?)\s*$")
_PUNCT = str.maketrans({c: " " for c in string.punctuation})


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
    if isinstance(options, str):
        stripped = options.strip()
        if not stripped:
            return {}
        if stripped.startswith("{"):
            options = json.loads(stripped)
        else:
            options = stripped.splitlines()
    if isinstance(options, Mapping):
        return {str(k).strip().upper(): str(v).strip() for k, v in options.items()}
    try:
        lines = list(options)
    except TypeError:
        raise ValueError(f"options must be a mapping, JSON object or list of 'A. text' lines, got {type(options).__name__}") from None
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


def _single(letters: list[str], valid: str) -> str | None:
    found = {letter for letter in letters if letter in valid}
    return found.pop() if len(found) == 1 else None


def extract_choice(response: str, options: Mapping[str, str] | None = None) -> Choice:
    """Find the option letter ``response`` commits to; ambiguous answers give ``Choice(None, "none")``."""
    valid = "".join(sorted(options)) if options else DEFAULT_LETTERS
    tags = _ANSWER_TAG_RE.findall(response)
    if tags:
        inner = tags[-1]
        bare = _BARE_RE.match(inner)
        if bare and bare.group(1).upper() in valid:
            return Choice(bare.group(1).upper(), "answer_tag")
        letter = _single(_PHRASE_RE.findall(inner) or _PAREN_RE.findall(inner), valid)
        if letter is None and options:
            letter = _by_option_text(inner, options)
        return Choice(letter, "answer_tag" if letter else "none")
    body = _THINK_RE.sub(" ", response)
    phrases = [m for m in _PHRASE_RE.findall(body) if m in valid]
    if phrases:
        # The last stated answer is the final one ("… not A. The answer is C.").
        return Choice(phrases[-1], "answer_phrase")
    letter = _single(_PAREN_RE.findall(body), valid)
    if letter:
        return Choice(letter, "parenthesized")
    bare = _BARE_RE.match(body.strip().splitlines()[0] if body.strip() else "")
    if bare and bare.group(1).isupper() and bare.group(1) in valid:
        return Choice(bare.group(1), "bare_letter")
    if options:
        letter = _by_option_text(body, options)
        if letter:
            return Choice(letter, "option_text")
    return Choice(None, "none")


def format_ok(response: str) -> bool:
    """True when the response is ``[<think>…</think>] <answer>X</answer>`` and nothing else."""
    return _FORMAT_RE.match(response) is not None


def ground_truth_letter(ground_truth: Any, options: Mapping[str, str] | None = None) -> str:
    """The correct letter from "B", "<answer>B</answer>", "(B)" or the option's text."""
    choice = extract_choice(str(ground_truth), options)
    if choice.letter is None:
        raise ValueError(f"cannot read an option letter from ground truth {ground_truth!r}")
    return choice.letter


EXTRACTION_METHODS = ("none", "answer_tag", "answer_phrase", "parenthesized", "bare_letter", "option_text")


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


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    format_weight: float = 0.0,
    **_: Any,
) -> dict[str, float]:
    """verl ``custom_reward_function`` entry: options come from ``extra_info["options"]``."""
    options = (extra_info or {}).get("options")
    return score_choice(solution_str, ground_truth, options, format_weight=format_weight)
