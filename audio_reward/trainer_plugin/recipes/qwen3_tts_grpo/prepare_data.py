"""Text list or JSONL → verl parquet for GRPO on Qwen3-TTS.

Input: a ``.txt`` file with one sentence per line, or a ``.jsonl`` file with
objects ``{"text": ..., "language"?: "en", "id"?: ..., "target_audio"?: path}``
(``target_audio`` a recording of the text, copied beside the generated speech in
the validation artifacts).  A per-row voice (``ref_audio``/``ref_text``) is
refused: verl-omni's ``qwen3_tts_rl`` conditions every rollout on the one
x-vector of ``tts_spk_embed_path`` and reads nothing else of the row but its
text, so the voice would be dropped without a word.  Output rows follow verl-omni's TTS
format: ``prompt`` (one user turn with the text), ``reward_model.ground_truth``
(the text the speech must say), ``data_source`` and ``extra_info`` (``index``,
``split``, ``language``; validation rows also ``generation_seed``).  ``extra_info.split`` also
tells the reward manager which samples are validation ones.  The splits are
disjoint by id (the record's ``id``, else its line number in the input) and
by normalised text (a repeated sentence stays on one side), so the
checkpoint evaluation's held-out check passes on them.

``generation_seed`` fixes a validation row's sampling where the rollout reads
it (the Qwen3-TTS branch of verl-omni that samples candidate ``k`` of a
validation row with seed ``generation_seed + k``), so every validation pass
draws the same samples; a rollout that does not read it ignores it.  It is
derived from ``--seed`` and the row's id alone (:func:`generation_seed`).

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
import zlib
from pathlib import Path
from typing import Any

from ...samples import SPEAKER_REFERENCE_KEY
from .._parquet import prepare, read_records, split_for_training

DATA_SOURCE = "tts_cer"
SEED_LIMIT = 2**31 - 1
"""Sampling seeds stay below this (vLLM's and the rollout's seed range); ``generation_seed + k`` wraps at it."""
VOICE_FIELDS = ("ref_audio", "ref_text")


def generation_seed(seed: int, row_id: str) -> int:
    """A validation row's fixed sampling seed: from ``--seed`` and the row's id only, so reordering or adding
    rows changes no other row's seed."""
    return zlib.crc32(f"{seed}:{row_id}".encode()) % SEED_LIMIT


def to_row(record: dict[str, Any], index: int, split: str, default_language: str | None,
           speaker_reference: Path | None = None, seed: int = 0) -> dict[str, Any]:
    """One verl row; ``seed`` (``--seed``) fixes a validation row's ``generation_seed``."""
    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"record {index} has no non-empty 'text': {record!r}")
    text = " ".join(text.split())
    # The default id is the record's line in the input (split_for_training keeps it), unique across both splits.
    rid = record.get("id", record.get("_position", index))
    if voice := [name for name in VOICE_FIELDS if record.get(name) not in (None, "")]:
        raise ValueError(
            f"record {rid}: {'/'.join(voice)} gives the row a voice of its own, which the recipe would drop: "
            "verl-omni's qwen3_tts_rl speaks every row in the one voice of tts_spk_embed_path (SPK_EMBED_PATH). "
            "Remove the field; make the run's voice file with `audio-reward tts-speaker REF.wav --out SPK.json` "
            "(and pass --speaker-reference REF.wav to score speaker similarity against that recording)")
    extra: dict[str, Any] = {"index": str(rid), "split": split, "text": text}
    if split == "val":
        extra["generation_seed"] = generation_seed(seed, str(rid))
    if language := record.get("language", default_language):
        extra["language"] = str(language)
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
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the split and of the validation rows' generation_seed (default 0)")
    parser.add_argument("--speaker-reference", type=Path, default=None, metavar="REF.wav",
                        help="the run's voice (the recording given to tts-speaker), written into every row for the "
                             "speaker-similarity reward; off by default")
    args = parser.parse_args(argv)
    reference = args.speaker_reference
    if reference is not None:
        reference = reference.expanduser().resolve()
        if not reference.is_file():
            parser.error(f"--speaker-reference {args.speaker_reference} does not exist")

    def rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]], None]:
        train, val = split_for_training(read_records(args.input), args.val_size, args.seed)
        return ([to_row(r, i, "train", args.language, reference, args.seed) for i, r in enumerate(train)],
                [to_row(r, i, "val", args.language, reference, args.seed) for i, r in enumerate(val)], None)

    return prepare(rows, Path(args.out_dir))


if __name__ == "__main__":
    raise SystemExit(main())
