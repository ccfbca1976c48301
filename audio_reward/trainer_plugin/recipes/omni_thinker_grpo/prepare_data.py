"""AVQA-style JSONL → verl parquet for GRPO on the Qwen3-Omni thinker.

Input: a ``.jsonl`` file of ``{"audio": path, "question": ..., "options":
["A. ...", "B. ..."] or {"A": ..., ...}, "answer": "B", "id"?: ...}``
(``answer`` may also be ``<answer>B</answer>`` or the option's text).  Output
rows: ``prompt`` (system instruction + a user turn ``<audio>question`` with the
lettered options), ``audios`` (the clip's absolute path; verl's RLHFDataset
expands the ``<audio>`` placeholder), ``reward_model.ground_truth`` (the
letter) and ``extra_info`` (``index``, ``split``, ``options`` as JSON, read by
:func:`audio_reward.trainer_plugin.mcq.compute_score`).

    python -m audio_reward.trainer_plugin.recipes.omni_thinker_grpo.prepare_data \\
        avqa.jsonl --out-dir data/omni_avqa --val-size 200
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from audio_reward.scoring.choice import ground_truth_letter, parse_options

from .._parquet import check_unique_ids, prepare, read_records, split_for_training

DATA_SOURCE = "avqa"
SYSTEM_PROMPT = (
    "Listen to the audio and answer the multiple-choice question. Think it through between <think> and </think>, "
    "then give only the letter of the chosen option between <answer> and </answer>."
)


def to_row(record: dict[str, Any], index: int, split: str, base: Path) -> dict[str, Any]:
    for key in ("audio", "question", "options", "answer"):
        if not record.get(key):
            raise ValueError(f"record {index} lacks {key!r}: {record!r}")
    audio = Path(str(record["audio"])).expanduser()
    if not audio.is_absolute():
        audio = base / audio
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
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="AVQA-style .jsonl")
    parser.add_argument("--out-dir", required=True, help="folder for train.parquet and val.parquet")
    parser.add_argument("--val-size", type=int, default=200,
                        help="validation rows (default 200); at most half of the input, so training keeps the most")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    base = Path(args.input).resolve().parent

    def rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        records = read_records(args.input)
        check_unique_ids(records)
        train, val = split_for_training(records, args.val_size, args.seed)
        return ([to_row(r, i, "train", base) for i, r in enumerate(train)],
                [to_row(r, i, "val", base) for i, r in enumerate(val)])

    return prepare(rows, Path(args.out_dir))


if __name__ == "__main__":
    raise SystemExit(main())
