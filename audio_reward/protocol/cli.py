"""``audio-reward schema`` and ``audio-reward validate``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import get_args

EXIT_VALID, EXIT_INVALID, EXIT_UNREADABLE = 0, 1, 2


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``schema`` and ``validate`` commands to ``audio-reward``."""
    from .validation import MessageKind

    p = sub.add_parser("schema", help="write the JSON Schema files of every protocol message and of eval_results.json")
    p.add_argument("--out", type=Path, required=True, help="folder to write *.schema.json into")
    p.set_defaults(func=_schema)

    p = sub.add_parser(
        "validate",
        help="validate a protocol message (request, response, error or batch)",
        description="Exit 0 when valid, 1 when invalid, 2 when the input cannot be read or parsed.",
    )
    p.add_argument("file", help="JSON file, or - for standard input")
    p.add_argument("--kind", choices=get_args(MessageKind), help="message kind (detected when omitted)")
    p.add_argument("--max-audio-seconds", type=float, default=60.0, help="audio length limit (default 60)")
    p.set_defaults(func=_validate)


def _schema(args: argparse.Namespace) -> int:
    from .schema import write_schemas

    for path in write_schemas(args.out):
        print(path)
    return 0


def _validate(args: argparse.Namespace) -> int:
    from .errors import ProtocolError
    from .models import Limits
    from .validation import parse_json, validate_message

    try:
        raw = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        print(f"audio-reward validate: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        obj = parse_json(raw)
    except ProtocolError as exc:
        print(f"audio-reward validate: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    kind, issues = validate_message(obj, args.kind, Limits(max_audio_seconds=args.max_audio_seconds))
    if not issues:
        print(f"OK ({kind})")
        return EXIT_VALID
    print(f"INVALID ({kind}): {len(issues)} error(s)")
    for issue in issues:
        print(f"  {issue.path}: {issue.message} [{issue.code}]")
    return EXIT_INVALID
