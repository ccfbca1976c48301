"""The toy task's verl parquet: one prompt per row asking for one word, the word itself in ``ground_truth``."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from .speech import HELDOUT_WORDS, TRAIN_WORDS

DATA_SOURCE = "audio_reward_toy_tts"


def row(index: int, word: str, kind: str, split: str) -> dict[str, Any]:
    """One verl row: the chat prompt, the target text the scorer should hear, and what the agent loop needs."""
    return {"data_source": DATA_SOURCE, "prompt": [{"role": "user", "content": f"say {word}"}], "ability": "tts",
            "agent_name": "speak_agent", "reward_model": {"style": "model", "ground_truth": word},
            "extra_info": {"index": index, "split": split, "text": word, "word": word, "speech": kind}}


def write_data(out_dir: str | Path, kind: str = "instant", train_rows: int = 256, seed: int = 0) -> None:
    """Write ``train.parquet`` (prompts for the training words, drawn at random) and ``val.parquet`` (one
    prompt per held-out word, which no training prompt asks for) to ``out_dir``."""
    from ..recipes._parquet import write_parquet

    out = Path(out_dir)
    rng = random.Random(seed)
    write_parquet([row(i, rng.choice(TRAIN_WORDS), kind, "train") for i in range(train_rows)], out / "train.parquet")
    write_parquet([row(i, word, kind, "val") for i, word in enumerate(HELDOUT_WORDS)], out / "val.parquet")
