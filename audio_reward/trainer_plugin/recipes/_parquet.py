"""Shared I/O of the recipes' data preparation: read a text list or JSONL, write verl parquet."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Iterable


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """``.jsonl``: one JSON object per line; anything else: one text per non-empty line (``{"text": ...}``)."""
    path = Path(path)
    records: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line:
                continue
            if path.suffix == ".jsonl":
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: not JSON ({exc})") from None
                if not isinstance(obj, dict):
                    raise ValueError(f"{path}:{lineno}: expected a JSON object")
                records.append(obj)
            else:
                records.append({"text": line})
    if not records:
        raise ValueError(f"{path} holds no records")
    return records


def split_records(records: list[dict[str, Any]], val_size: int, seed: int) -> tuple[list, list]:
    """A seeded shuffle, then the last ``val_size`` records for validation."""
    if not 0 <= val_size < len(records):
        raise ValueError(f"val_size must be in [0, {len(records) - 1}] for {len(records)} records, got {val_size}")
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    train = [records[i] for i in order[: len(records) - val_size]]
    val = [records[i] for i in order[len(records) - val_size :]]
    return train, val


def write_parquet(rows: Iterable[dict[str, Any]], path: str | Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = list(rows)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return len(rows)
