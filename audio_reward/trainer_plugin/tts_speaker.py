"""``audio-reward tts-speaker REF.wav --out voice.json``: the fixed voice of a Qwen3-TTS GRPO run.

verl-omni's Qwen3-TTS rollout (pipeline ``qwen3_tts_rl``) conditions every
candidate on one speaker embedding, read from
``actor_rollout_ref.model.override_config.tts_spk_embed_path`` by
``verl_omni.pipelines.qwen3_tts.talker_forward.load_speaker_xvector``: it
``json.load``s the file and reshapes the numbers to ``(1, D)`` float32.  The
file format is therefore a JSON list of ``D`` finite numbers, where ``D`` is the
speaker encoder's ``enc_dim`` (the talker's hidden size: 1024 for
Qwen3-TTS-12Hz-0.6B-Base), nothing else::

    [0.0123, -0.4561, ...]

This tool computes it with the Base model's own speaker encoder
(``Qwen3TTSForConditionalGeneration.extract_speaker_embedding``, 24 kHz mono
input, as verl-omni's example prescribes) from a reference recording of any
rate and channel count.  It runs in the TTS environment (qwen-tts); the
trainer and the checkpoint evaluation read the same file.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

from .clips import load_clip

SPEAKER_RATE = 24000
"""The rate qwen-tts's speaker encoder accepts (``extract_speaker_embedding`` asserts it)."""


def read_speaker_embedding(path: str | Path) -> list[float]:
    """The embedding of a speaker file; :class:`ValueError` says what is wrong with a bad one."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]  # (1, D) reshapes to the same vector
    if not isinstance(value, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value
    ):
        raise ValueError("must be a JSON list of finite numbers (verl-omni's load_speaker_xvector format)")
    return [float(v) for v in value]


def write_speaker_embedding(path: str | Path, vector: Sequence[float]) -> None:
    """Write ``vector`` in the format :func:`read_speaker_embedding` and verl-omni read."""
    values = [float(v) for v in vector]
    if not values or not all(math.isfinite(v) for v in values):
        raise ValueError("a speaker embedding must be a non-empty vector of finite numbers")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(values), encoding="utf-8")
    tmp.replace(path)


def extract_speaker_embedding(model_path: str | Path, reference: str | Path, device: str = "cpu") -> list[float]:
    """The Base model's speaker embedding of ``reference`` (a list of ``enc_dim`` floats)."""
    import torch
    from qwen_tts.core.models import Qwen3TTSForConditionalGeneration

    model = Qwen3TTSForConditionalGeneration.from_pretrained(str(model_path), dtype=torch.float32,
                                                             local_files_only=True)
    if model.speaker_encoder is None:
        raise ValueError(f"{model_path} is a {model.tts_model_type!r} Qwen3-TTS model; the speaker encoder is in "
                         "the Base model (e.g. Qwen3-TTS-12Hz-0.6B-Base)")
    model = model.to(device).eval()
    # mono float32 at the encoder's rate: channels averaged, resampled with soxr
    embedding = model.extract_speaker_embedding(audio=load_clip(str(reference), SPEAKER_RATE), sr=SPEAKER_RATE)
    return embedding.detach().float().cpu().reshape(-1).tolist()


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "tts-speaker",
        help="speaker embedding JSON for a Qwen3-TTS GRPO run (verl-omni's tts_spk_embed_path)",
        description="Compute the speaker embedding of REF (any rate, mono or not) with the Qwen3-TTS Base model's "
                    "speaker encoder and write it as verl-omni reads it: a JSON list of floats. Runs where qwen-tts "
                    "is installed (the TTS environment).",
    )
    p.add_argument("reference", type=Path, help="reference recording of the voice (WAV, FLAC, ...)")
    p.add_argument("--out", required=True, type=Path, help="speaker embedding JSON to write")
    p.add_argument("--model", type=Path, default=os.environ.get("MODEL_PATH"),
                   help="local Qwen3-TTS Base folder (default: $MODEL_PATH)")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import sys

    if args.model is None:
        print("error: give --model (a local Qwen3-TTS Base folder) or set MODEL_PATH", file=sys.stderr)
        return 2
    for path in (args.reference, args.model):
        if not path.exists():
            print(f"error: {path} does not exist", file=sys.stderr)
            return 2
    try:
        vector = extract_speaker_embedding(args.model, args.reference, args.device)
    except ModuleNotFoundError as exc:
        print(f"error: {exc.name} is not installed here; run tts-speaker in the TTS environment "
              "(scripts/envs/tts.sh)", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        # a torchaudio whose compiled library was built for another torch fails at qwen-tts's import (OSError)
        hint = (" (scripts/envs/tts.sh installs torchaudio without its compiled library, which cannot load into "
                "that environment's torch)") if isinstance(exc, OSError) and "torchaudio" in str(exc) else ""
        print(f"error: {exc}{hint}", file=sys.stderr)
        return 1
    write_speaker_embedding(args.out, vector)
    print(f"wrote a {len(vector)}-value speaker embedding of {args.reference} to {args.out}")
    return 0
