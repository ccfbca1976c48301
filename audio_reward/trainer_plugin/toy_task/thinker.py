"""The thinker-shaped GRPO loop through real verl: audio questions, the multiple-choice reward, the audio ablation.

    python -m audio_reward.trainer_plugin.toy_task.thinker OUT [--device cpu] [--steps N] \\
        [--scorer-url URL] [--speech KIND] [--failure-policy raise|mask] [-- HYDRA_OVERRIDES...]

The shape of the Qwen3-Omni thinker recipe (:mod:`..recipes.omni_thinker_grpo`)
at toy size: rows written by the recipe's own ``prepare_data.to_row`` (system
instruction, a user turn ``<audio>question`` with lettered options, the clip's
path in ``audios``), verl's ``RLHFDataset`` expanding the placeholder, verl's
vLLM rollout given ``multi_modal_data["audio"]``, the recipe's reward
(``naive`` manager + :func:`audio_reward.trainer_plugin.mcq.compute_score`,
format weight 0), GRPO with an FSDP2 actor, a checkpoint, ``audio-reward
export-checkpoint`` on it, and the recipe's audio ablation (``eval_thinker``'s
questions, grading, results file and report) on the base policy and the
export, each question asked with and without its clip.  ``OUT/train_summary.json``
says what ran (``thinker_eval_results`` is the ablation's results file);
``OUT/reward_curve.json``/``.png`` hold the reward per step.

The toy question: which of four tones a clip holds (A-D, one pitch each),
with the options in the prompt.  The policy is a tiny random Qwen2-Audio
(:mod:`.audio_policy`), not a Qwen3-Omni thinker, because in verl 0.9.1 with
vLLM 0.28 and transformers 5.10 a Qwen3-Omni checkpoint cannot be both the
actor and the rollout:

* vLLM registers Qwen3-Omni only as the full ``Qwen3OmniMoeForConditionalGeneration``
  layout (``vllm/model_executor/models/registry.py`` lines 578-581) and reads
  ``hf_config.thinker_config`` (``qwen3_omni_moe_thinker.py`` lines 1133 and
  1617-1618); transformers' class for that layout has ``generate`` and no
  ``forward`` (``transformers/models/qwen3_omni_moe/modeling_qwen3_omni_moe.py``
  line 3782 ff.), so verl's actor cannot compute log-probs with it, while the
  thinker-only layout verl could train is not a vLLM architecture;
* ``Qwen3OmniMoeProcessor``, which both verl's dataset and vLLM's
  multimodal processing build, needs Qwen2-VL's image and video processors,
  and those import torchvision (``transformers/models/qwen2_vl/image_processing_qwen2_vl.py``
  line 25), which this trainer environment has not;
* verl's ``hf_processor`` knows vision processors only
  (``verl/utils/tokenizer/tokenizer.py`` lines 208-234) and binds no
  ``get_rope_index`` for Qwen3-Omni's M-RoPE.

verl-omni's ``vllm_omni`` rollout and dataset class are what the real recipe
uses for those.  Qwen2-Audio is the smallest audio-text model that
transformers 5.10 and vLLM 0.28 both run, with 1-D positions; what verl and
vLLM still lack for it is patched by :mod:`.audio_support` (each patch names
its line).  ``eval_thinker``'s command line accepts Qwen3-Omni folders only,
so this launcher runs its functions with a Qwen2-Audio loader and prompter.

``--scorer-url`` and ``--speech`` are accepted for the same command line as
:mod:`.train` and ``scripts/train_cpu.sh``, and unused: the multiple-choice
reward is computed from the answer text, without a scorer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from ..recipes.overrides import MANAGER_NAME, ROLLOUT, THINKER_OVERRIDES, OverrideTable
from . import train
from .audio_support import MODULE as AUDIO_SUPPORT_MODULE
from .train import LoopSettings, LoopTask, RunPaths, trainer_overrides

logger = logging.getLogger(__name__)

TONES = MappingProxyType({"A": 220.0, "B": 330.0, "C": 495.0, "D": 742.5})
"""The answer letter each clip's pitch stands for (a fifth apart, so they are easy to tell)."""
QUESTION = "Which tone is this?"
CLIP_SECONDS = 1.0
MAX_PROMPT = 448
"""Tokens: the recipe's system prompt (one byte a token), 27 audio tokens for a one-second clip, the options."""
MAX_RESPONSE = 4
"""A letter and the end of the turn, with room for a wrong answer."""
RECIPE_ROWS = OverrideTable(tuple(row for row in THINKER_OVERRIDES.rows if row.key.startswith(
    (MANAGER_NAME, "reward.custom_reward_function.", f"{ROLLOUT}.temperature", f"{ROLLOUT}.val_kwargs."))))
"""The thinker recipe's rows the toy loop gives as the recipe does: its reward (verl's naive manager calling the
multiple-choice function, format weight 0: accuracy only), its rollout temperature and its greedy validation."""


def thinker_overrides(settings: LoopSettings, paths: RunPaths) -> list[str]:
    """The toy TTS loop's overrides (:func:`.train.trainer_overrides`) turned into the thinker recipe's shape.

    The TTS loop's reward manager, agent loop and lengths are replaced by the
    recipe's multiple-choice reward, verl's default single-turn agent loop and
    lengths for an audio question; device, FSDP2, precision, batch sizes and
    Ray settings stay as the TTS loop sets them.
    """
    replaced = ("reward.audio_reward.", "reward.reward_manager.name", "actor_rollout_ref.rollout.agent.",
                "data.max_prompt_length", "data.max_response_length", "trainer.project_name", "trainer.experiment_name")
    return [
        # the TTS loop's overrides whose key (``+`` stripped) is not replaced below
        *(o for o in trainer_overrides(LoopSettings(**{**asdict(settings), "overrides": []}), paths)
          if not o.split("=", 1)[0].lstrip("+").startswith(replaced)),
        f"data.max_prompt_length={MAX_PROMPT}", f"data.max_response_length={MAX_RESPONSE}",
        "data.filter_overlong_prompts=true", "data.truncation=error", "data.validation_shuffle=false",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        # FSDP2 groups per text decoder layer: Qwen2-Audio's own choice (its encoder's attention modules) left the
        # audio encoder's weights sharded inside the actor's forward (aten.addmm "mixed torch.Tensor and DTensor")
        *(f"+actor_rollout_ref.{role}.fsdp_config.wrap_policy.transformer_layer_cls_to_wrap=[Qwen2DecoderLayer]"
          for role in ("actor", "ref")),
        *RECIPE_ROWS.render({}),  # the recipe's reward and sampling, from its own table
        "trainer.project_name=audio_reward_toy", "trainer.experiment_name=toy_thinker",
        *settings.overrides,
    ]


def write_thinker_data(out: Path, train_rows: int, val_rows: int = 8, seed: int = 0) -> None:
    """Clips and the recipe's rows (``prepare_data.to_row``): ``train.parquet``, ``val.parquet`` (ids disjoint)."""
    import numpy as np
    import soundfile as sf

    from ..recipes._parquet import write_parquet
    from ..recipes.omni_thinker_grpo.prepare_data import to_row
    from .speech import SAMPLE_RATE, tone

    rng = np.random.default_rng(seed)
    letters = sorted(TONES)
    options = {k: f"a tone of {v:g} Hz" for k, v in TONES.items()}
    (out / "clips").mkdir(parents=True, exist_ok=True)
    for split, count in (("train", train_rows), ("val", val_rows)):
        rows = []
        for i in range(count):
            # validation holds each letter equally often; training draws them
            letter = letters[i % len(letters)] if split == "val" else str(rng.choice(letters))
            clip = out / "clips" / f"{split}_{i:04d}.wav"
            # a random level and phase: no two clips are the same file, as no two questions of a real set are
            sf.write(clip, tone(CLIP_SECONDS, TONES[letter], rng.uniform(0.2, 0.5), rng.uniform(0, 2 * np.pi)),
                     SAMPLE_RATE)
            rows.append(to_row({"audio": str(clip), "question": QUESTION, "options": options, "answer": letter,
                                "id": f"{split}-{i}"}, i, split, out))
        write_parquet(rows, out / f"{split}.parquet")


def prepare(settings: LoopSettings, paths: RunPaths) -> None:
    """Build the policy and the data in ``settings.out``."""
    from .audio_policy import build_audio_policy

    build_audio_policy(paths.policy, seed=settings.seed)
    write_thinker_data(paths.data, train_rows=max(32, settings.steps * settings.prompts_per_step), seed=settings.seed)


def _prompter_class() -> type:
    """``eval_thinker``'s prompter for a Qwen2-Audio folder: the processor builds the features and audio tokens."""
    from ..recipes.omni_thinker_grpo.eval_thinker import Mode, Prompter, Question, messages

    class Qwen2AudioPrompter(Prompter):  # type: ignore[misc, unused-ignore]
        """Chat template, clips and features from the folder's ``Qwen2AudioProcessor``."""

        def __init__(self, folder: Path) -> None:
            from transformers import AutoProcessor

            self.processor = AutoProcessor.from_pretrained(str(folder))
            self.tokenizer = self.processor.tokenizer
            self.features = self.processor.feature_extractor
            self.audio_token_id = int(cast(Any, self.tokenizer.convert_tokens_to_ids(self.processor.audio_token)))

        def inputs(self, question: Question, mode: Mode) -> dict[str, Any]:
            text = str(self.tokenizer.apply_chat_template(messages(question, mode), add_generation_prompt=True,
                                                          tokenize=False))
            if mode == "without_audio":
                return dict(self.tokenizer(text, return_tensors="pt"))
            clips = [self.load_clip(a) for a in question.audios]
            return dict(self.processor(text=[text], audio=clips, sampling_rate=self.features.sampling_rate,
                                       return_tensors="pt"))

    return Qwen2AudioPrompter


def audio_ablation(settings: LoopSettings, paths: RunPaths, checkpoint: Path) -> Path:
    """``eval_thinker``'s ablation (greedy, with and without audio) of the initial policy and the export of
    ``checkpoint``; returns the results file.

    The base's processor asks both checkpoints, as ``eval_thinker`` does; the
    held-out check and the results schema are ``eval_thinker``'s own.
    """
    import torch
    from transformers import Qwen2AudioForConditionalGeneration

    from ..recipes.omni_thinker_grpo.eval_thinker import (
        RESULTS_JSON,
        Decoding,
        ablation,
        check_held_out,
        questions,
        row_key,
    )

    checkpoints = [("base", paths.policy), (f"step{checkpoint.name.rsplit('_', 1)[-1]}", paths.export)]
    val, out = paths.data / "val.parquet", settings.out / "eval_thinker"
    rows = questions(val, None)
    held, lines = check_held_out(rows, val, [paths.data / "train.parquet"], False, row_key)
    if lines:
        raise ValueError("; ".join(lines))
    ablation(checkpoints, rows, held,
             lambda folder: Qwen2AudioForConditionalGeneration.from_pretrained(str(folder), dtype=torch.float32).eval(),
             _prompter_class()(paths.policy), Decoding(max_new_tokens=MAX_RESPONSE), "cpu", 1, out)
    return out / RESULTS_JSON


THINKER_TASK = LoopTask(prepare, thinker_overrides, audio_ablation, "thinker_eval_results", describe={
    "audio": "the clip reaches the rollout in multi_modal_data",
    "policy": "tiny random Qwen2-Audio (audio_policy.py)",
    "reward": "naive reward manager + audio_reward.trainer_plugin.mcq.compute_score (format weight 0)",
}, modules=(AUDIO_SUPPORT_MODULE,))
"""The thinker-shaped loop: the toy audio policy answers a question about a clip."""


def parse_args(argv: Sequence[str] | None = None) -> LoopSettings:
    """The same command line as :mod:`.train` (``--scorer-url`` optional here: the reward needs no scorer).

    The defaults are smaller than the TTS loop's: an audio question is some 400 tokens, and CI runs this in minutes.
    """
    defaults = LoopSettings(Path("."), "", steps=3, prompts_per_step=4, group_size=4, learning_rate=1e-4)
    return train.parse_loop_args(argv, "python -m audio_reward.trainer_plugin.toy_task.thinker",
                                 __doc__.split("\n\n")[0], defaults,
                                 scorer_help="accepted and unused: the multiple-choice reward is text")


def main(argv: Sequence[str] | None = None) -> int:
    return train.main(argv, parse=parse_args, task=THINKER_TASK)


if __name__ == "__main__":
    raise SystemExit(main())
