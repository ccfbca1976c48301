"""The toy task's verl parquet: one prompt per row asking for one word, the target text in ``ground_truth``."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from .speech import WORDS, check_kind, target_text

DATA_SOURCE = "audio_reward_toy_tts"


def row(index: int, word: str, kind: str, split: str) -> dict[str, Any]:
    """One verl row: the chat prompt, the target text the scorer should hear, and what the agent loop needs."""
    text = target_text(word, kind)
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"say {word}"}],
        "ability": "tts",
        "agent_name": "speak_agent",
        "reward_model": {"style": "model", "ground_truth": text},
        "extra_info": {"index": index, "split": split, "text": text, "word": word, "speech": kind},
    }


def write_data(out_dir: str | Path, kind: str = "instant", train_rows: int = 256, val_rows: int = 8,
               seed: int = 0, targets: int = 1) -> tuple[Path, Path]:
    """Write ``train.parquet`` and ``val.parquet`` to ``out_dir``: prompts for the first ``targets`` toy words
    (validation holds them in turn).

    One target: the policy learns to say it rather than any of the other 22 tokens it can say, which GRPO
    shows within a dozen steps.  Several: it must also learn to copy the word from the prompt (a group's
    right word is another group's wrong one), which a tiny random policy takes far more steps to learn.
    """
    if not 1 <= targets <= len(WORDS):
        raise ValueError(f"targets must be 1 to {len(WORDS)}, got {targets}")
    words = WORDS[:targets]
    from ..recipes._parquet import write_parquet

    check_kind(kind)
    out = Path(out_dir)
    rng = random.Random(seed)
    write_parquet([row(i, rng.choice(words), kind, "train") for i in range(train_rows)], out / "train.parquet")
    write_parquet([row(i, words[i % len(words)], kind, "val") for i in range(val_rows)], out / "val.parquet")
    return out / "train.parquet", out / "val.parquet"
