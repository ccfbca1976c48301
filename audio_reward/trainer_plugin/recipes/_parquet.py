"""Shared I/O of the recipes' data preparation: read a text list or JSONL, split it, write verl parquet."""

from __future__ import annotations

import json
import random
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...extras import is_missing_dependency, missing_extra_message

EXTRA = "recipes"
"""The extra that brings pyarrow, which writes the parquet files (verl's environments have it already)."""


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """``.jsonl``: a JSON object per line; ``.json``: a JSON list of objects; else a text per line (``{"text": ...}``).

    Blank lines are skipped; a line or item that is not a JSON object raises :class:`ValueError`.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path} does not exist" if not path.exists() else f"{path} is not a file")
    if path.suffix == ".json":
        records = _read_json_list(path)
    else:
        with open(path, encoding="utf-8") as fh:
            records = [_line_record(path, lineno, line) for lineno, raw in enumerate(fh, 1) if (line := raw.strip())]
    if not records:
        raise ValueError(f"{path} holds no records")
    return records


def _line_record(path: Path, lineno: int, line: str) -> dict[str, Any]:
    """One non-blank line: a JSON object in a ``.jsonl`` file, else the text itself."""
    if path.suffix != ".jsonl":
        return {"text": line}
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{lineno}: not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path}:{lineno}: expected a JSON object")
    return obj


def _read_json_list(path: Path) -> list[dict[str, Any]]:
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(records, list):
        raise ValueError(f"{path}: expected a JSON list of objects, got {type(records).__name__}")
    for position, record in enumerate(records):
        if not isinstance(record, dict):
            raise ValueError(f"{path}: item {position} is not a JSON object")
    return records


def normalize_text(text: str) -> str:
    """The text as a held-out check compares it: NFKC, case-folded, punctuation and symbols dropped, spaces collapsed.

    "Hello, world!" and "hello world" are the same sentence to a TTS policy:
    one in training and the other in evaluation is a leak.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(" " if unicodedata.category(c)[0] in "PSZC" else c for c in folded)
    return " ".join(kept.split())


def split_for_training(records: list[dict[str, Any]], val_size: int, seed: int) -> tuple[list, list]:
    """A seeded split into train and validation that share no id and no normalised text.

    Explicit ``id`` fields must be unique in the input, so no id names a
    train row and a validation row.  Records with the same normalised text
    form one group, and a group goes to one side whole: a repeated sentence
    never lands on both sides.  Groups are shuffled with ``seed``;
    validation takes whole groups until it holds at least ``val_size``
    records.  A ``--val-size`` that leaves fewer training rows than
    validation rows is refused.  Each record keeps its position in the input
    as ``_position``, the default id, so ids are unique across both splits.
    """
    seen: dict[str, int] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for position, record in enumerate(records):
        if "id" in record:
            key = str(record["id"])
            if key in seen:
                raise ValueError(f"id {key!r} appears in records {seen[key]} and {position}: ids must be unique")
            seen[key] = position
        text = record.get("text")
        text_key = normalize_text(text) if isinstance(text, str) else f"\0{position}"
        groups.setdefault(text_key, []).append({**record, "_position": position})
    if val_size < 0:
        raise ValueError(f"--val-size must be 0 or more, got {val_size}")
    most = len(records) // 2
    if val_size > most:
        raise ValueError(f"--val-size {val_size} would leave fewer training rows than validation rows: the input "
                         f"holds {len(records)} records; give --val-size {most} or less")
    order = list(groups.values())  # the same permutation as shuffling the keys: shuffle reads only the length
    random.Random(seed).shuffle(order)
    val: list[dict[str, Any]] = []
    train: list[dict[str, Any]] = []
    for group in order:
        if len(val) < val_size and len(val) + len(group) < len(records):
            val.extend(group)
        else:
            train.extend(group)
    if len(train) < len(val):
        raise ValueError(f"--val-size {val_size} would leave {len(train)} training rows and {len(val)} validation "
                         "rows (repeated sentences stay on one side); give a smaller --val-size")
    return train, val


def prepare(make_rows: Callable[[], tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]],
            out_dir: Path) -> int:
    """Build the train and validation rows, write both parquet files and say so, then the note
    ``make_rows`` returned with them (if any); the exit status.

    A missing pyarrow, a bad input or a bad ``--val-size`` is one line on
    stderr and exit status 2, before anything is written.
    """
    try:
        import pyarrow.parquet  # noqa: F401
    except ModuleNotFoundError as exc:
        if not is_missing_dependency(exc):
            raise
        print(missing_extra_message(EXTRA, "prepare_data (it writes parquet with pyarrow)", exc), file=sys.stderr)
        return 2
    try:
        train, val, note = make_rows()
    except ValueError as exc:
        print(f"prepare_data: {exc}", file=sys.stderr)
        return 2
    write_parquet(train, out_dir / "train.parquet")
    write_parquet(val, out_dir / "val.parquet")
    print(f"wrote {len(train)} train rows to {out_dir / 'train.parquet'} and {len(val)} validation rows to "
          f"{out_dir / 'val.parquet'}")
    if note:
        print(note)
    return 0


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
