"""The toy base policy: a tiny Qwen3 pretrained to say the asked word, with a habit of padding it.

GRPO sharpens what a policy already does now and then; it does not teach from
nothing in a dozen steps.  So the toy task starts, as a real run starts from a
pretrained model, from a policy that can already do the task some of the time:
asked ``say W`` (for every toy word, held-out ones included), it was trained
to answer

- ``W`` first most of the time (:data:`FIRST_RIGHT`), another word or a filler otherwise;
- then to stop only sometimes (:data:`STOP`): more often it adds ``please``
  (:data:`PLEASE`) or one or two other words, as a TTS model that pads its
  speech does.

Sampled, the base says exactly the word about one time in five, so GRPO
groups hold right and wrong answers from the first step; greedy, it says
``W please``, which the CER reward scores 0.  What the run must learn, to say
the word and stop, is the same for every word, so it shows on the held-out
words no training prompt asks for.

The weights are committed (:data:`BASE_WEIGHTS`, 1.4 MB), so that a run does
not spend minutes pretraining; this module made them::

    python -m audio_reward.trainer_plugin.toy_task.pretrain [--steps 800] [--seed 0]
"""

from __future__ import annotations

import argparse
import logging
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .policy import BASE_WEIGHTS, build_policy
from .speech import WORDS

logger = logging.getLogger(__name__)

FIRST_RIGHT = 0.85
"""How often the pretraining answer starts with the asked word (0.10 another word, 0.05 a filler)."""
STOP = 0.25
"""How often the pretraining answer stops after its first word."""
PLEASE = 0.45
"""How often it adds ``please`` (the rest: one or two other words)."""
PADDING = ("please", "the", "a", "and", "now", "so", "well")
"""Words a pretraining answer pads with."""


def habit(word: str, rng: random.Random) -> list[str]:
    """One pretraining answer to ``say <word>``."""
    draw = rng.random()
    first = word if draw < FIRST_RIGHT else rng.choice(WORDS) if draw < FIRST_RIGHT + 0.10 else rng.choice(PADDING)
    draw = rng.random()
    if draw < STOP:
        return [first]
    if draw < STOP + PLEASE:
        return [first, "please"]
    return [first, *rng.choices((*PADDING, *WORDS), k=rng.randint(1, 2))]


def _batch(tokenizer: Any, rng: random.Random, size: int) -> tuple[Any, Any]:
    """Token ids and labels (the answer and its end-of-turn only) of ``size`` pretraining examples."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    rows = []
    for _ in range(size):
        word = rng.choice(WORDS)
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": f"say {word}"}],
                                               add_generation_prompt=True, tokenize=False)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(" ".join(habit(word, rng)), add_special_tokens=False)["input_ids"]
        rows.append((prompt_ids, [*answer_ids, tokenizer.eos_token_id]))
    # padded on the right to the longest example; the prompt and the padding are no labels (-100)
    ids = pad_sequence([torch.tensor(p + a) for p, a in rows], batch_first=True, padding_value=tokenizer.pad_token_id)
    labels = pad_sequence([torch.tensor([-100] * len(p) + a) for p, a in rows], batch_first=True, padding_value=-100)
    return ids, labels


def pretrain(out: Path = BASE_WEIGHTS, steps: int = 800, seed: int = 0, batch: int = 64) -> Path:
    """Pretrain the toy policy's random weights on :func:`habit` answers; write them to ``out``."""
    import tempfile

    import torch
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with tempfile.TemporaryDirectory() as folder:
        build_policy(folder, seed=seed, weights=None)
        tokenizer: Any = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    model.train()
    for step in range(steps):
        ids, labels = _batch(tokenizer, rng, batch)
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 100 == 0 or step == steps - 1:
            logger.info("step %d loss %.3f", step, loss.item())
    save_model(model, str(out))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Write the base weights (``--out``, by default the committed file); 0 when done."""
    parser = argparse.ArgumentParser(prog="python -m audio_reward.trainer_plugin.toy_task.pretrain",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=BASE_WEIGHTS)
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logger.info("wrote %s", pretrain(args.out, args.steps, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
