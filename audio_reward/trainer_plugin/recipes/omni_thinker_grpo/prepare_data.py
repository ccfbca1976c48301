"""AVQA questions → verl parquet for GRPO on the Qwen3-Omni thinker.

Two input layouts, told apart by the first record's keys:

**AVQA-style JSONL** (the first record has ``question``): ``{"audio": path,
"question": ..., "options": ["A. ...", "B. ..."] or {"A": ..., ...},
"answer": "B", "id"?: ...}`` (``answer`` may also be ``<answer>B</answer>``
or the option's text).  A row that lacks a field, names a clip that does not
exist, has fewer than two options or an answer that is not one of them is
refused: one line on stderr, exit status 2, nothing written.

**AVQA-R1-6K** (the first record has ``problem``), the layout verl-omni's own
AVQA example converts: a ``.json`` list (or ``.jsonl``) of ``{"problem": ...,
"options": ["A. ...", ...], "solution": "<answer>B</answer>", "path":
{"audio": ..., "image": ...}, "data_type": "image_audio", "problem_type":
..., "problem_id": ...}``, or the dataset's folder, whose
``train/omni_rl_format_train.json`` and ``valid/omni_rl_format_valid.json``
become the train and validation splits as they are (``--val-size`` applies to
a single file only).  Media paths are relative to the JSON file's folder, the
data root.  As verl-omni's converter does, a row that cannot be used is
dropped and counted by reason, and only an input with no usable row is
refused; the CLI prints the counts as one line after the files are written.
The reasons are verl-omni's names: ``empty_problem``,
``unsupported_modality`` (a ``data_type`` without audio: only
``image_audio`` and ``audio`` rows are kept), ``invalid_options`` (not
"A. text" lines, a repeated letter, fewer than two options),
``invalid_solution`` (no option letter, or one that is not an option),
``missing_audio`` (no audio path, or no file there) and
``audio_outside_root`` (a path that leads out of the data root, e.g.
``../x.wav`` or an absolute path elsewhere; verl-omni counts it as
``missing_audio``).  The thinker gets the audio only: the image is neither
required nor written (an AVQA question asked of the audio alone may be
harder than with its frame).  ``extra_info`` keeps the source's
``problem_id`` and ``problem_type``.  An item of a ``.json`` list that is not
a JSON object is refused (verl-omni drops it as ``invalid_record``): the
file itself is malformed.

Output rows, either layout: ``prompt`` (system instruction + a user turn
``<audio>question`` with the lettered options), ``audios`` (the clip's
absolute path; verl's RLHFDataset expands the ``<audio>`` placeholder),
``reward_model.ground_truth`` (the letter) and ``extra_info`` (``index``,
``split`` — ``train`` or ``val`` —, ``options`` as JSON, read by
:func:`audio_reward.trainer_plugin.mcq.compute_score`).

    python -m audio_reward.trainer_plugin.recipes.omni_thinker_grpo.prepare_data \\
        avqa.jsonl --out-dir data/omni_avqa --val-size 200
    python -m audio_reward.trainer_plugin.recipes.omni_thinker_grpo.prepare_data \\
        AVQA_R1/ --out-dir data/omni_avqa_r1
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from audio_reward.scoring.choice import ground_truth_letter, parse_options

from .._parquet import prepare, read_records, split_for_training

DATA_SOURCE = "avqa"
SYSTEM_PROMPT = (
    "Listen to the audio and answer the multiple-choice question. Think it through between <think> and </think>, "
    "then give only the letter of the chosen option between <answer> and </answer>."
)
DEFAULT_VAL_SIZE = 200
AUDIO_DATA_TYPES = frozenset({"image_audio", "audio"})
"""AVQA-R1-6K ``data_type`` values whose rows have a clip; other rows (an image alone) are dropped."""
R1_SPLITS = (("train", Path("train/omni_rl_format_train.json")), ("val", Path("valid/omni_rl_format_valid.json")))
"""The AVQA-R1-6K folder's two files, the ones verl-omni's converter reads, and the split each becomes."""

Rows = list[dict[str, Any]]


def to_row(record: dict[str, Any], index: int, split: str, base: Path) -> dict[str, Any]:
    """One AVQA-style record as a parquet row; a record that cannot be asked raises :class:`ValueError`."""
    for key in ("audio", "question", "options", "answer"):
        if not record.get(key):
            raise ValueError(f"record {index} lacks {key!r}: {record!r}")
    audio = base / Path(str(record["audio"])).expanduser()  # an absolute path replaces base
    if not audio.is_file():
        raise ValueError(f"record {index}: audio file {audio} does not exist")
    options = parse_options(record["options"])
    if len(options) < 2:
        raise ValueError(f"record {index}: a multiple-choice question needs at least 2 options, got {options}")
    letter = ground_truth_letter(record["answer"], options)
    if letter not in options:
        raise ValueError(f"record {index}: answer {record['answer']!r} is not one of the options {sorted(options)}")
    lines = "\n".join(f"{k}. {v}" for k, v in sorted(options.items()))
    question = str(record["question"]).replace("<audio>", "").strip()
    return {
        "data_source": DATA_SOURCE,
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"<audio>{question}\nOptions:\n{lines}"},
        ],
        "audios": [str(audio.resolve())],
        "ability": "audio_mcq",
        "reward_model": {"style": "rule", "ground_truth": letter},
        "extra_info": {
            # the input position, not the position in the split: ids stay unique across train and validation
            "index": str(record.get("id", record.get("_position", index))),
            "split": split,
            "options": json.dumps(options, ensure_ascii=False),
            **record.get("_extra_info", {}),
        },
    }


def is_avqa_r1(records: Sequence[Mapping[str, Any]]) -> bool:
    """True when ``records`` are in the AVQA-R1-6K layout: the first has ``problem`` and no ``question``."""
    return bool(records) and "problem" in records[0] and "question" not in records[0]


def _r1_options(raw: Any) -> dict[str, str] | None:
    if not isinstance(raw, list):
        return None
    try:
        options = parse_options(raw)
    except ValueError:
        return None
    # parse_options keeps the last of a repeated letter; a repeat leaves the question ambiguous
    return options if len(options) == len(raw) >= 2 else None


def _r1_audio(record: Mapping[str, Any], root: Path) -> Path | str:
    """The clip's resolved path, or the reason it cannot be used."""
    media = record.get("path")
    raw = str(media.get("audio") or "").strip() if isinstance(media, Mapping) else ""
    if not raw:
        return "missing_audio"
    root = root.resolve()
    # resolved first, so ``..`` and symbolic links are followed before the containment check
    audio = (root / raw).resolve()
    if not audio.is_relative_to(root):
        return "audio_outside_root"
    return audio if audio.is_file() else "missing_audio"


def from_avqa_r1(record: Mapping[str, Any], record_id: str, root: Path) -> dict[str, Any] | str:
    """One AVQA-R1-6K record as an AVQA-style record for :func:`to_row`, or the reason it is dropped.

    ``root`` is the data root, the JSON file's folder: media paths are
    relative to it and may not lead out of it.
    """
    problem = str(record.get("problem") or "").strip()
    if not problem:
        return "empty_problem"
    if record.get("data_type") not in AUDIO_DATA_TYPES:
        return "unsupported_modality"
    options = _r1_options(record.get("options"))
    if options is None:
        return "invalid_options"
    try:
        letter = ground_truth_letter(record.get("solution") or "", options)
    except ValueError:
        return "invalid_solution"
    audio = _r1_audio(record, root)
    if isinstance(audio, str):
        return audio
    return {"audio": str(audio), "question": problem, "options": options, "answer": letter, "id": record_id,
            "_extra_info": {"problem_id": str(record.get("problem_id", "")),
                            "problem_type": str(record.get("problem_type") or "")}}


def convert_avqa_r1(records: Sequence[Mapping[str, Any]], root: Path, source: str,
                    id_prefix: str = "") -> tuple[Rows, Counter[str]]:
    """The usable records of an AVQA-R1-6K list and the count dropped per reason.

    Each kept record's id is ``id_prefix`` + its position in ``records``, so
    it leads back to the source row and stays unique across the splits.  A
    list with no usable record raises :class:`ValueError` naming ``source``
    and the counts.
    """
    converted = [from_avqa_r1(record, f"{id_prefix}{position}", root) for position, record in enumerate(records)]
    kept = [row for row in converted if not isinstance(row, str)]
    dropped = Counter(reason for reason in converted if isinstance(reason, str))
    if not kept:
        raise ValueError(f"{source} holds no usable AVQA-R1 record ({len(records)} dropped: {_reasons(dropped)})")
    return kept, dropped


def _reasons(dropped: Counter[str]) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in sorted(dropped.items())) or "none"


def drop_summary(kept: int, dropped: Counter[str]) -> str:
    """The CLI's line on an AVQA-R1-6K input: records kept and records dropped, by reason."""
    total = kept + sum(dropped.values())
    return f"kept {kept} of {total} AVQA-R1 records; dropped {total - kept}: {_reasons(dropped)}"


def _from_r1_folder(folder: Path, val_size: int | None) -> tuple[Rows, Rows, Counter[str]]:
    if val_size is not None:
        raise ValueError(f"{folder} is an AVQA-R1-6K folder, which brings its own validation split: --val-size "
                         "applies to a single file")
    if missing := [str(rel) for _, rel in R1_SPLITS if not (folder / rel).is_file()]:
        raise ValueError(f"{folder} is not an AVQA-R1-6K folder: it lacks {' and '.join(missing)}")
    rows: dict[str, Rows] = {}
    dropped: Counter[str] = Counter()
    for split, rel in R1_SPLITS:
        path = folder / rel
        kept, drops = convert_avqa_r1(read_records(path), path.parent, str(path), f"{rel.parts[0]}/")
        dropped.update(drops)
        rows[split] = [to_row(r, i, split, path.parent) for i, r in enumerate(kept)]
    return rows["train"], rows["val"], dropped


def load(source: Path, val_size: int | None, seed: int) -> tuple[Rows, Rows, Counter[str] | None]:
    """Train and validation rows of a file (split with ``val_size``) or of an AVQA-R1-6K folder (its own split).

    The third item counts the AVQA-R1 records dropped, by reason; it is None
    for the AVQA-style layout, whose bad rows raise :class:`ValueError`.
    """
    if source.is_dir():
        return _from_r1_folder(source, val_size)
    records = read_records(source)
    base = source.resolve().parent
    dropped = None
    if is_avqa_r1(records):
        records, dropped = convert_avqa_r1(records, base, str(source))
    train, val = split_for_training(records, DEFAULT_VAL_SIZE if val_size is None else val_size, seed)
    return ([to_row(r, i, "train", base) for i, r in enumerate(train)],
            [to_row(r, i, "val", base) for i, r in enumerate(val)], dropped)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="AVQA-style .jsonl, AVQA-R1-6K .json/.jsonl, or the AVQA-R1-6K folder")
    parser.add_argument("--out-dir", required=True, help="folder for train.parquet and val.parquet")
    parser.add_argument("--val-size", type=int, default=None,
                        help=f"validation rows taken from a single file (default {DEFAULT_VAL_SIZE}); at most half "
                             "of the input, so training keeps the most; not with a folder, which has its own split")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    def rows() -> tuple[Rows, Rows, str | None]:
        train, val, dropped = load(Path(args.input), args.val_size, args.seed)
        return train, val, None if dropped is None else drop_summary(len(train) + len(val), dropped)

    return prepare(rows, Path(args.out_dir))


if __name__ == "__main__":
    raise SystemExit(main())
