"""Compare Qwen3-TTS checkpoints (base vs trained) on the validation texts with ``audio-reward eval``.

For each ``NAME=MODEL_DIR`` it synthesizes every validation text with qwen-tts
(voice clone from ``--ref-audio``/``--ref-text``, greedy), writes the WAVs and a
manifest, scores them with ``audio-reward eval`` on the scorer, and prints the
per-checkpoint summary side by side.  Run it in an environment with qwen-tts
(its transformers pin differs from verl's) and a GPU for real checkpoints.

    python -m audio_reward.trainer_plugin.recipes.qwen3_tts_grpo.eval_checkpoints \\
        --val data/qwen3_tts/val.parquet --ref-audio voice.wav --ref-text "..." \\
        --url http://scorer:8000 --out eval/ base=/models/Qwen3-TTS-12Hz-0.6B-Base \\
        step500=outputs/qwen3_tts_grpo/checkpoints/global_step_500/actor/huggingface
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import soundfile as sf


def validation_texts(path: str, limit: int | None) -> list[tuple[str, str, str]]:
    """(id, text, language) of every validation row."""
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    out = []
    for i, row in enumerate(rows[:limit] if limit else rows):
        extra = row.get("extra_info") or {}
        out.append((str(extra.get("index", i)), row["reward_model"]["ground_truth"], extra.get("language") or "en"))
    return out


LANGUAGE_NAMES = {"en": "English", "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "de": "German",
                  "fr": "French", "es": "Spanish", "it": "Italian", "pt": "Portuguese", "ru": "Russian"}


def synthesize(model_dir: str, rows: list[tuple[str, str, str]], ref_audio: str, ref_text: str, out: Path,
               device: str) -> Path:
    import torch
    from qwen_tts import Qwen3TTSModel

    model = Qwen3TTSModel.from_pretrained(model_dir, device_map=device, dtype=torch.bfloat16 if device != "cpu" else torch.float32)
    prompt = model.create_voice_clone_prompt(ref_audio=ref_audio, ref_text=ref_text)
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / "manifest.jsonl"
    with open(manifest, "w", encoding="utf-8") as fh:
        for sid, text, lang in rows:
            wavs, rate = model.generate_voice_clone(text=text, language=LANGUAGE_NAMES.get(lang, "Auto"),
                                                    voice_clone_prompt=prompt, do_sample=False)
            sf.write(out / f"{sid}.wav", np.asarray(wavs[0], dtype=np.float32), rate)
            fh.write(json.dumps({"id": sid, "audio": f"{sid}.wav", "text": text, "language": lang}) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", metavar="NAME=MODEL_DIR")
    parser.add_argument("--val", required=True, help="validation parquet from prepare_data.py")
    parser.add_argument("--ref-audio", required=True, help="speaker reference WAV for voice cloning")
    parser.add_argument("--ref-text", required=True, help="transcript of the reference")
    parser.add_argument("--url", required=True, help="scorer base URL")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--limit", type=int, default=None, help="first N validation rows only")
    parser.add_argument("--device", default="cuda:0")
    args = parser.parse_args(argv)
    rows = validation_texts(args.val, args.limit)
    summaries = {}
    for spec in args.checkpoints:
        name, sep, model_dir = spec.partition("=")
        if not sep:
            parser.error(f"checkpoint {spec!r} must be NAME=MODEL_DIR")
        out = Path(args.out) / name
        manifest = synthesize(model_dir, rows, args.ref_audio, args.ref_text, out / "audio", args.device)
        subprocess.run([sys.executable, "-m", "audio_reward.cli", "eval", str(manifest), "--out", str(out / "eval"),
                        "--url", args.url, "--no-progress"], check=True)
        summaries[name] = json.loads((out / "eval" / "summary.json").read_text())
    print(json.dumps(summaries, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
