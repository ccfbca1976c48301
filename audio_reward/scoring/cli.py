"""``audio-reward error-rate``: CER/WER of transcripts you already have.

Reads JSONL lines ``{"id", "reference", "hypothesis", "language"?}`` and writes
one JSONL line per input line, in order: the normalized texts and error rates,
or ``{"id", "error": {"code", "message"}, "line"}`` for a line it refuses.  It
runs :func:`~audio_reward.scoring.compare_texts`, the code the
server scores with, so a benchmark's transcripts are re-scored exactly as the
reward scores them.  Exit 0 when every line was scored, 1 when some were
refused, 2 when the input cannot be read or an option is invalid.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

import orjson

from .errors import ScoringError
from .normalizers import DEFAULT_NORMALIZER, NORMALIZERS, Normalizer, get_normalizer, language_code
from .scorer import compare_texts

__all__ = ["register", "score_line", "score_lines"]

EXIT_SCORED, EXIT_REFUSED, EXIT_UNREADABLE = 0, 1, 2


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``error-rate`` command to ``audio-reward``."""
    p = sub.add_parser(
        "error-rate",
        help="CER/WER of existing transcripts (JSONL in, JSONL out), as the server computes them",
        description=(
            'Reads JSONL lines {"id", "reference", "hypothesis", "language"?} and writes one JSONL line per '
            "input line: the normalized texts with cer and wer, or an error. Exit 0 when every line was "
            "scored, 1 when some were refused, 2 when the input cannot be read or an option is invalid."
        ),
    )
    p.add_argument("--normalizer", default=DEFAULT_NORMALIZER, choices=NORMALIZERS,
                   help=f"text rules, as the server's --normalizer (default: {DEFAULT_NORMALIZER}, as the server's)")
    p.add_argument(
        "--language",
        help="language of the lines that name none (code or Whisper name); without it, each reference decides "
        "whether Chinese rules apply",
    )
    p.add_argument("file", metavar="FILE|-", help="JSONL file, or - for standard input")
    p.set_defaults(func=_error_rate)


def score_line(raw: bytes, *, normalizer: Normalizer, language: str | None) -> dict[str, Any]:
    """One JSONL input line to its output object (an ``error`` object for a refused line)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return _refused(None, "invalid_json", f"not valid JSON: {exc}")
    if not isinstance(obj, dict):
        return _refused(None, "invalid_line", f"a line must be a JSON object, got {type(obj).__name__}")
    line_id = obj.get("id")
    if line_id is not None and (isinstance(line_id, bool) or not isinstance(line_id, (str, int))):
        return _refused(None, "invalid_line", f"id must be a string or an integer, got {type(line_id).__name__}")
    for field in ("reference", "hypothesis"):
        if not isinstance(obj.get(field), str):
            problem = "is missing" if field not in obj else f"must be a string, got {type(obj[field]).__name__}"
            return _refused(line_id, "invalid_line", f"{field} {problem}")
    line_language = obj.get("language")
    if line_language is not None and not isinstance(line_language, str):
        return _refused(
            line_id, "invalid_line", f"language must be a string or null, got {type(line_language).__name__}"
        )
    try:
        compared = compare_texts(
            obj["reference"], obj["hypothesis"], normalizer=normalizer, language=line_language or language
        )
    except ScoringError as exc:
        return _refused(line_id, exc.code, exc.message)
    rates = asdict(compared.rates)  # the two rates first, the counts they are made of last
    return {
        "id": line_id,
        "cer": rates.pop("cer"),
        "wer": rates.pop("wer"),
        "normalized_reference": compared.normalized_reference,
        "normalized_hypothesis": compared.normalized_hypothesis,
        "normalizer": normalizer.name,
        "language": compared.language or "",
        "char_level": compared.char_level,
        **rates,
    }


def _refused(line_id: Any, code: str, message: str) -> dict[str, Any]:
    return {"id": line_id, "error": {"code": code, "message": message}}


def score_lines(lines: Iterable[bytes], out: IO[bytes], *, normalizer: Normalizer, language: str | None) -> int:
    """Score every non-blank line of ``lines`` into ``out``; returns how many were refused."""
    refused = 0
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        result = score_line(raw, normalizer=normalizer, language=language)
        if "error" in result:
            refused += 1
            result["line"] = number
        out.write(orjson.dumps(result) + b"\n")
    return refused


class _UnreadableInput(Exception):
    """Reading the input failed part way (an I/O error, not a bad line)."""


def _read(stream: IO[bytes]) -> Iterator[bytes]:
    try:
        yield from stream
    except OSError as exc:
        raise _UnreadableInput(exc.strerror or str(exc)) from exc


def _error_rate(args: argparse.Namespace) -> int:
    try:
        normalizer = get_normalizer(args.normalizer)
    except ImportError as exc:  # whisper-en without openai-whisper installed
        print(f"error: --normalizer {args.normalizer}: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        normalizer.check_language(language_code(args.language))
    except ScoringError as exc:
        print(f"error: --language {args.language}: {exc.message}", file=sys.stderr)
        return EXIT_UNREADABLE
    out = sys.stdout.buffer
    try:
        # Opened apart from the with below, so that only a failure to open reads as "cannot read".
        stream = sys.stdin.buffer if args.file == "-" else Path(args.file).open("rb")  # noqa: SIM115
    except OSError as exc:
        print(f"error: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        with contextlib.nullcontext(stream) if stream is sys.stdin.buffer else stream:
            refused = score_lines(_read(stream), out, normalizer=normalizer, language=args.language)
    except _UnreadableInput as exc:
        print(f"error: cannot read {args.file}: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    finally:
        out.flush()
    return EXIT_REFUSED if refused else EXIT_SCORED
