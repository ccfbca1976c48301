#!/usr/bin/env bash
# GPU smoke test of the trainer plugin: a few real GRPO steps of verl's PPO
# trainer on one GPU with a tiny random model, no network.
#
# What it exercises: verl's main_ppo (FSDP actor, vLLM rollout, Ray), the
# audio-reward plugin loaded through its verl.plugins entry point, the
# `grpo_masked` advantage estimator and the multiple-choice reward
# (audio_reward.trainer_plugin.mcq) as verl's custom reward function.
# The TTS rollout itself lives in verl-omni and is not part of this smoke.
#
# Needs: one CUDA GPU; a venv with CUDA torch, verl[verl-core]==0.9.1, vllm
# (a version verl 0.9.1 supports) and audio-reward (pip install -e .);
# no network (model and tokenizer are built from config classes here).
#
# Usage: PYTHON=/path/to/venv/bin/python scripts/gpu_smoke_grpo.sh [WORK_DIR] [extra Hydra overrides...]
set -euo pipefail
PYTHON="${PYTHON:-python3}"
WORK="${1:-$(mktemp -d /tmp/audio-reward-gpu-smoke.XXXXXX)}"
shift || true
STEPS="${STEPS:-3}"
mkdir -p "$WORK"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

"$PYTHON" - "$WORK" <<'PY'
import json, random, sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

work = Path(sys.argv[1])
model_dir = work / "tiny-model"
words = ["A", "B", "C", "D", "Answer", ":", "<answer>", "</answer>", "the", "sound", "is", "question", "options"]
vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(words)}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
fast.save_pretrained(model_dir)
torch.manual_seed(0)
cfg = Qwen2Config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True,
                  bos_token_id=1, eos_token_id=1, pad_token_id=0)
Qwen2ForCausalLM(cfg).save_pretrained(model_dir)
rng = random.Random(0)
options = {"A": "the sound", "B": "question", "C": "options", "D": "is"}
rows = [{"data_source": "smoke_mcq", "prompt": [{"role": "user", "content": "question options A B C D"}],
         "ability": "mcq", "reward_model": {"style": "rule", "ground_truth": rng.choice("ABCD")},
         "extra_info": {"index": str(i), "split": "train", "options": json.dumps(options)}} for i in range(64)]
pq.write_table(pa.Table.from_pylist(rows), work / "train.parquet")
pq.write_table(pa.Table.from_pylist(rows[:8]), work / "val.parquet")
print(f"tiny model and data in {work}")
PY

"$PYTHON" -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo_masked \
    data.train_files="$WORK/train.parquet" data.val_files="$WORK/val.parquet" \
    data.train_batch_size=8 data.max_prompt_length=32 data.max_response_length=16 data.dataloader_num_workers=0 \
    actor_rollout_ref.model.path="$WORK/tiny-model" actor_rollout_ref.model.use_remove_padding=false \
    actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.actor.optim.lr=1e-4 actor_rollout_ref.actor.use_kl_loss=false \
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.mode=async actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 actor_rollout_ref.rollout.gpu_memory_utilization=0.3 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 actor_rollout_ref.rollout.enforce_eager=true \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 \
    reward.num_workers=1 \
    reward.custom_reward_function.path=pkg://audio_reward.trainer_plugin.mcq \
    reward.custom_reward_function.name=compute_score \
    trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.logger='[console]' trainer.val_before_train=false \
    trainer.test_freq=-1 trainer.save_freq=-1 trainer.total_training_steps="$STEPS" \
    trainer.default_local_dir="$WORK/checkpoints" "$@" 2>&1 | tee "$WORK/train.log"

grep -q "step:${STEPS} " "$WORK/train.log" || { echo "smoke FAILED: step ${STEPS} not reached" >&2; exit 1; }
if grep -E "step:[0-9]+ .*(critic/score/mean|actor/pg_loss):nan" "$WORK/train.log"; then
    echo "smoke FAILED: NaN in metrics" >&2; exit 1
fi
echo "smoke ok: ${STEPS} GRPO steps; log in $WORK/train.log"
