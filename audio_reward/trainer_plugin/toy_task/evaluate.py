"""The toy task's before/after evaluation: each checkpoint speaks the held-out prompts, ``audio-reward eval``
scores them and ``eval --compare`` pairs the two runs.

A checkpoint folder (the initial policy, or an ``export-checkpoint`` of the
run) answers each prompt greedily with transformers; its words are spoken as
in training and written as WAV files with an ``audio-reward eval`` manifest.
The scoring is the real ``eval`` command against the run's scorer, so the
figures are the ones a user's evaluation gives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .policy import CHAT_TEMPLATE, MAX_ANSWER_TOKENS
from .speech import HELDOUT_WORDS, speak


def synthesize(model_dir: str | Path, out_dir: str | Path, kind: str) -> Path:
    """Speak the prompt of each held-out word with the checkpoint in ``model_dir``; returns the manifest written."""
    import soundfile
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # a bar per load on the console of a run that logs per step

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer: Any = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = tokenizer.chat_template or CHAT_TEMPLATE
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    rows = []
    for word in HELDOUT_WORDS:
        prompt: Any = tokenizer.apply_chat_template([{"role": "user", "content": f"say {word}"}],
                                               add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.no_grad():
            ids = model.generate(**prompt, max_new_tokens=MAX_ANSWER_TOKENS, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
        said = tokenizer.decode(ids[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True).split()
        audio, rate = speak(said, kind)
        # float WAV: the instant speech's number lives in the first sample, which 16-bit PCM would round
        soundfile.write(out / f"{word}.wav", audio, rate, subtype="FLOAT")
        rows.append({"id": word, "audio": f"{word}.wav", "text": word, "said": " ".join(said)})
    manifest = out / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return manifest


def _cli(*args: str) -> None:
    # the evaluation is the trainer's too: it waits while the scorer says "not now" (ClientSettings)
    env = {"AUDIO_REWARD_CLIENT_WAIT_WHILE_BUSY": "true", **os.environ}
    subprocess.run([sys.executable, "-m", "audio_reward.cli", *args], check=True, stdout=subprocess.DEVNULL, env=env)


def before_after(base_dir: str | Path, trained_dir: str | Path, out_dir: str | Path, scorer_url: str,
                 kind: str) -> Path:
    """Score the base and the trained checkpoint with ``audio-reward eval`` and compare them; returns the
    ``eval_results.json`` of ``eval --compare`` (base first)."""
    out = Path(out_dir)
    runs = []
    for name, model in (("base", base_dir), ("trained", trained_dir)):
        manifest = synthesize(model, out / name / "audio", kind)
        _cli("eval", "--url", scorer_url, "--no-progress", str(manifest), "--out", str(out / name / "eval"))
        runs.append(str(out / name / "eval"))
    _cli("eval", "--compare", *runs, "--out", str(out / "compare"))
    return out / "compare" / "eval_results.json"
