"""Text list or JSONL → verl parquet for GRPO on Qwen3-TTS.

Input: a ``.txt`` file with one sentence per line, or a ``.jsonl`` file with
objects ``{"text": ..., "language"?: "en", "id"?: ..., "ref_audio"?: path,
"ref_text"?: ..., "target_audio"?: path}`` (``ref_audio``/``ref_text`` name an optional speaker
reference for voice-cloning prompts; ``target_audio`` a recording of the text, copied beside
the generated speech in the validation artifacts).  Output rows follow verl-omni's TTS
format: ``prompt`` (one user turn with the text), ``reward_model.ground_truth``
(the text the speech must say), ``data_source`` and ``extra_info`` (``index``,
``split``, ``language``, the speaker reference).  ``extra_info.split`` also
tells the reward manager which samples are validation ones.  The splits are
disjoint by id (the record's ``id``, else its line number in the input) and
by normalised text (a repeated sentence stays on one side), so the
checkpoint evaluation's held-out check passes on them.

``--speaker-reference REF.wav`` (off by default) writes the run's voice, the
recording whose x-vector ``audio-reward tts-speaker REF.wav`` writes, into
every row as ``extra_info.speaker_reference_path``: the reward then scores
each rollout's speaker similarity against it (the scorer needs
``--speaker-model``; the reward's ``speaker_weight`` decides its share).

    python -m audio_reward.trainer_plugin.recipes.qwen3_tts_grpo.prepare_data \\
        sentences.txt --out-dir data/qwen3_tts --val-size 100
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ....scorer_client.compute import SPEAKER_REFERENCE_KEY
from .._parquet import check_unique_ids, prepare, read_records, split_for_training

DATA_SOURCE = "tts_cer"


def to_row(record: dict[str, Any], index: int, split: str, default_language: str | None,
           speaker_reference: Path | None = None) -> dict[str, Any]:
    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"record {index} has no non-empty 'text': {record!r}")
    text = " ".join(text.split())
    # The default id is the record's line in the input (split_records keeps it), unique across both splits.
    rid = record.get("id", record.get("_position", index))
    extra: dict[str, Any] = {"index": str(rid), "split": split, "text": text}
    language = record.get("language", default_language)
    if language:
        extra["language"] = str(language)
    if record.get("ref_audio"):
        ref = Path(str(record["ref_audio"])).expanduser()
        if not ref.is_file():
            raise ValueError(f"record {index}: speaker reference {ref} does not exist")
        extra["ref_audio"] = str(ref.resolve())
        extra["ref_text"] = str(record.get("ref_text") or "")
    if record.get("target_audio"):
        target = Path(str(record["target_audio"])).expanduser()
        if not target.is_file():
            raise ValueError(f"record {index}: target recording {target} does not exist")
        extra["target_audio"] = str(target.resolve())
    if speaker_reference is not None:
        extra[SPEAKER_REFERENCE_KEY] = str(speaker_reference)
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": text}],
        "ability": "tts",
        "reward_model": {"style": "model", "ground_truth": text},
        "extra_info": extra,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="sentences .txt (one per line) or .jsonl")
    parser.add_argument("--out-dir", required=True, help="folder for train.parquet and val.parquet")
    parser.add_argument("--val-size", type=int, default=100,
                        help="validation rows (default 100); at most half of the input, so training keeps the most")
    parser.add_argument("--language", default="en", help="language of rows that do not give one (default en)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--speaker-reference", type=Path, default=None, metavar="REF.wav",
                        help="the run's voice (the recording given to tts-speaker), written into every row for the "
                             "speaker-similarity reward; off by default")
    args = parser.parse_args(argv)
    reference = args.speaker_reference
    if reference is not None:
        reference = reference.expanduser().resolve()
        if not reference.is_file():
            parser.error(f"--speaker-reference {args.speaker_reference} does not exist")

    def rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        records = read_records(args.input)
        check_unique_ids(records)
        train, val = split_for_training(records, args.val_size, args.seed)
        return ([to_row(r, i, "train", args.language, reference) for i, r in enumerate(train)],
                [to_row(r, i, "val", args.language, reference) for i, r in enumerate(val)])

    return prepare(rows, Path(args.out_dir))


if __name__ == "__main__":
    raise SystemExit(main())
