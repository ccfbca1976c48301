"""The thinker evaluation's questions per second, batched against one at a time, on a tiny random thinker.

``eval_thinker``'s own functions (``ask_all`` with ``--batch-size`` N and with 1) on the same model, the same
questions and threads, in interleaved rounds: AVQA-style rows written by the recipe's ``prepare_data``, with 24 kHz
clips and questions of different lengths (so the batch is padded), asked with and without the audio, greedy, up to
``--max-new-tokens``.  The model is ``tests/testkit/tiny_thinker.py``'s full Qwen3-Omni layout at toy size, whose
end-of-turn row is scaled up so that answers end at different steps, as a real model's do.  It prints questions per
second for each mode and batch size, the ratio batched / one-at-a-time (the median of the rounds), and whether the
two give the same answers.  A toy model's forward pass is cheap, so this measures what batching saves around it
(Python, ``generate``'s loop, small matrix products); on a GPU with the 30B thinker the gain is of another size.
Run it in the trainer environment (torch, transformers with Qwen3-Omni, pyarrow, soxr).

    python -m bench.thinker_eval [--questions 16] [--batch-sizes 4 8 16] [--rounds 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from audio_reward.trainer_plugin.recipes.omni_thinker_grpo import eval_thinker, prepare_data
from tests.testkit.tiny_thinker import build_thinker_folder


def questions(root: Path, n: int) -> list[eval_thinker.Question]:
    """``n`` questions with 1.5–4 s clips and question texts of 1 to 8 sentences, through prepare_data."""
    rng = np.random.default_rng(0)
    (root / "clips").mkdir(parents=True)
    with (root / "avqa.jsonl").open("w") as f:
        for i in range(n):
            sf.write(root / "clips" / f"{i}.wav", (0.1 * rng.standard_normal(36000 + 4000 * (i % 16))).astype(
                np.float32), 24000)
            f.write(json.dumps({"audio": f"clips/{i}.wav", "question": "What makes the sound?" + " Listen." * (i % 8),
                                "options": ["A. a dog", "B. a car", "C. rain", "D. a bell"], "answer": "ABCD"[i % 4]})
                    + "\n")
    with contextlib.redirect_stdout(io.StringIO()):  # its "wrote ..." line is not the bench's output
        assert prepare_data.main([str(root / "avqa.jsonl"), "--out-dir", str(root / "data"), "--val-size", "0"]) == 0
    return eval_thinker.questions(root / "data" / "train.parquet", None)


def timed(model: Any, prompter: eval_thinker.Prompter, rows: list[eval_thinker.Question], mode: eval_thinker.Mode,
          decoding: eval_thinker.Decoding, size: int) -> tuple[float, list[dict[str, Any]]]:
    """Wall seconds to ask every question in ``mode``, ``size`` per call, and the answers."""
    start = time.perf_counter()
    answers = eval_thinker.ask_all(model, prompter, rows, mode, decoding, "cpu", size)
    return time.perf_counter() - start, answers


def row(model: Any, prompter: eval_thinker.Prompter, rows: list[eval_thinker.Question], mode: eval_thinker.Mode,
        decoding: eval_thinker.Decoding, size: int, rounds: int) -> str:
    """One table row: both settings in ``rounds`` interleaved rounds, after a warm-up of each."""
    timed(model, prompter, rows[:size], mode, decoding, 1)
    timed(model, prompter, rows[:size], mode, decoding, size)
    walls: dict[str, list[float]] = {"one": [], "batched": []}
    same = True
    for _ in range(rounds):
        wall_one, one = timed(model, prompter, rows, mode, decoding, 1)
        wall_batched, batched = timed(model, prompter, rows, mode, decoding, size)
        walls["one"].append(wall_one)
        walls["batched"].append(wall_batched)
        same = same and one == batched
    qps_one, qps_batched = (len(rows) / statistics.median(walls[k]) for k in ("one", "batched"))
    return (f"| {mode.replace('_', ' ')} | {size} | {qps_one:.1f} | {qps_batched:.1f} | {qps_batched / qps_one:.2f}x "
            f"| {'yes' if same else 'NO'} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:  # the clips are read as the questions are asked
        rows = questions(Path(tmp) / "avqa", args.questions)
        folder = build_thinker_folder(Path(tmp) / "thinker", full=True)
        prompter = eval_thinker.Prompter(folder)
        model = eval_thinker.load_thinker(folder, "cpu")
        with torch.no_grad():  # answers that end at different steps, so finished rows sit padded in the batch
            model.lm_head.weight[prompter.tokenizer.convert_tokens_to_ids("<|im_end|>")] *= 2
        print(f"tiny Qwen3-Omni thinker, {args.threads} threads, {len(rows)} questions, greedy up to "
              f"{args.max_new_tokens} tokens, median of {args.rounds} interleaved rounds")
        print("| mode | batch | one at a time (q/s) | batched (q/s) | batched / one | same answers |")
        print("|---|---|---|---|---|---|")
        for mode in eval_thinker.MODES:
            for size in args.batch_sizes:
                print(row(model, prompter, rows, mode, eval_thinker.Decoding(args.max_new_tokens), size, args.rounds),
                      flush=True)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
