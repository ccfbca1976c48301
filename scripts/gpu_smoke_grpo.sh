#!/usr/bin/env bash
# GPU smoke test of the trainer plugin: a few real GRPO steps of verl's v1 trainer on one GPU, rewarded by
# audio-reward's AudioScoreRewardManager against a running scorer. No network, no model download.
#
# What it exercises: verl's main_ppo (FSDP actor, vLLM rollout, Ray, the v1 trainer with TransferQueue),
# our reward manager loaded by path as the recipes load it, streamed through verl's agent loop
# (AgentLoopWorker._compute_score -> RewardLoopWorker), a real `audio-reward serve` (Whisper tiny.en), and
# the fail-closed sampler. The policy is a tiny random Qwen2 over a word vocabulary; a small agent loop
# speaks each response with espeak-ng and puts the waveform in the rollout's extra fields (`audio`,
# `audio_sample_rate`), where verl-omni's TTS rollout puts it. The reward is how well the spoken words
# match the target sentence. (verl-omni's own Qwen3-TTS rollout needs its vLLM-Omni stack and real weights:
# docs/training.md.)
#
# Needs: one CUDA GPU; espeak-ng on PATH; PYTHON: a venv with CUDA torch, verl[verl-core]==0.9.1, a vllm
# verl 0.9.1 supports, and audio-reward; a scorer: SCORER_URL of a running `audio-reward serve`, or
# SCORER_PYTHON, an interpreter with audio-reward[server], to start one here on a free port.
#
# Usage: PYTHON=/venv/bin/python SCORER_PYTHON=/venv-server/bin/python scripts/gpu_smoke_grpo.sh [WORK_DIR] [overrides...]
set -euo pipefail
PYTHON="${PYTHON:-python3}"
WORK="${1:-$(mktemp -d /tmp/audio-reward-gpu-smoke.XXXXXX)}"
shift || true
STEPS="${STEPS:-3}"
mkdir -p "$WORK"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export VERL_USE_EXTERNAL_MODULES=audio_reward.trainer_plugin.verl_plugin
export PYTHONPATH="$WORK${PYTHONPATH:+:$PYTHONPATH}"  # the smoke's agent loop, for every Ray worker
command -v espeak-ng >/dev/null || { echo "smoke needs espeak-ng (apt-get install -y espeak-ng)" >&2; exit 2; }

SCORER_PID=""
cleanup() { [[ -n "$SCORER_PID" ]] && kill "$SCORER_PID" 2>/dev/null || true; }
trap cleanup EXIT
if [[ -z "${SCORER_URL:-}" ]]; then
    : "${SCORER_PYTHON:?set SCORER_URL to a running scorer, or SCORER_PYTHON to an interpreter with audio-reward[server]}"
    PORT="$("$SCORER_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    "$SCORER_PYTHON" -m audio_reward.cli serve --host 127.0.0.1 --port "$PORT" --model tiny.en \
        > "$WORK/scorer.log" 2>&1 &
    SCORER_PID=$!
    SCORER_URL="http://127.0.0.1:$PORT"
fi
for _ in $(seq 1 120); do
    curl -fsS "$SCORER_URL/v1/info" >/dev/null 2>&1 && break
    sleep 1
done
curl -fsS "$SCORER_URL/v1/info" >/dev/null || { echo "smoke FAILED: no scorer at $SCORER_URL" >&2; exit 1; }

"$PYTHON" - "$WORK" <<'PY'
import random, sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

work = Path(sys.argv[1])
model_dir = work / "tiny-model"
words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "red", "car", "stops", "here", "say"]
vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(words)}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
fast.save_pretrained(model_dir)
torch.manual_seed(0)
cfg = Qwen2Config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True,
                  bos_token_id=1, eos_token_id=1, pad_token_id=0, architectures=["Qwen2ForCausalLM"])
Qwen2ForCausalLM(cfg).save_pretrained(model_dir)
rng = random.Random(0)
sentences = ["the quick brown fox", "the lazy dog jumps", "the red car stops here", "the fox jumps over the dog"]
rows = []
for i in range(64):
    text = rng.choice(sentences)
    rows.append({"data_source": "smoke_tts", "prompt": [{"role": "user", "content": f"say {text}"}], "ability": "tts",
                 "reward_model": {"style": "model", "ground_truth": text},
                 "extra_info": {"index": str(i), "split": "train", "text": text}})
pq.write_table(pa.Table.from_pylist(rows), work / "train.parquet")
pq.write_table(pa.Table.from_pylist([dict(r, extra_info=dict(r["extra_info"], split="val")) for r in rows[:8]]),
               work / "val.parquet")
(work / "smoke_speak_agent.py").write_text('''
"""verl's single-turn agent loop, then espeak-ng speaks the response into the rollout's extra fields."""
import asyncio, io, subprocess

import numpy as np
import soundfile as sf
import torch
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop


class SpeakAgentLoop(SingleTurnAgentLoop):
    async def run(self, sampling_params, **kwargs):
        output = await super().run(sampling_params, **kwargs)
        text = self.tokenizer.decode(output.response_ids, skip_special_tokens=True).strip()
        if text:
            wav = await asyncio.to_thread(subprocess.run, ["espeak-ng", "--stdout", text], capture_output=True,
                                          check=True)
            audio, rate = sf.read(io.BytesIO(wav.stdout), dtype="float32")
        else:  # nothing said: a short silence, which the scorer transcribes as nothing
            audio, rate = np.zeros(4000, np.float32), 16000
        output.extra_fields.update(audio=torch.from_numpy(np.ascontiguousarray(audio)), audio_sample_rate=int(rate))
        return output
''')
(work / "agent_loops.yaml").write_text("- name: speak_agent\n  _target_: smoke_speak_agent.SpeakAgentLoop\n")
print(f"tiny model, data and agent loop in {work}")
PY

"$PYTHON" -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files="$WORK/train.parquet" data.val_files="$WORK/val.parquet" \
    data.train_batch_size=8 data.max_prompt_length=32 data.max_response_length=16 data.dataloader_num_workers=0 \
    actor_rollout_ref.model.path="$WORK/tiny-model" actor_rollout_ref.model.use_remove_padding=false \
    actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.actor.optim.lr=1e-4 actor_rollout_ref.actor.use_kl_loss=false \
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.mode=async actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 actor_rollout_ref.rollout.gpu_memory_utilization=0.3 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 actor_rollout_ref.rollout.enforce_eager=true \
    actor_rollout_ref.rollout.agent.agent_loop_config_path="$WORK/agent_loops.yaml" \
    actor_rollout_ref.rollout.agent.default_agent_loop=speak_agent \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 \
    reward.num_workers=1 \
    reward.reward_manager.source=importlib \
    reward.reward_manager.module.path=pkg://audio_reward.trainer_plugin.reward_manager \
    reward.reward_manager.name=AudioScoreRewardManager \
    "+reward.audio_reward.server_url=$SCORER_URL" \
    +reward.audio_reward.language=en \
    "+reward.audio_reward.failure_log=$WORK/reward_failures.jsonl" \
    "+reward.audio_reward.validation_dir=$WORK/validation_audio" \
    trainer.v1.sampler.custom_sampler.path=pkg://audio_reward.trainer_plugin.fail_closed \
    trainer.v1.sampler.custom_sampler.name=FailClosedSyncReplayBuffer \
    +trainer.v1.sampler.sampler_kwargs.max_failed_groups=0 \
    "+trainer.v1.sampler.sampler_kwargs.failure_log=$WORK/reward_failures.jsonl" \
    trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.logger='[console]' trainer.val_before_train=true \
    trainer.test_freq=-1 trainer.save_freq=-1 trainer.total_training_steps="$STEPS" \
    trainer.default_local_dir="$WORK/checkpoints" "$@" 2>&1 | tee "$WORK/train.log"

grep -q "step:${STEPS} " "$WORK/train.log" || { echo "smoke FAILED: step ${STEPS} not reached" >&2; exit 1; }
if grep -E "step:[0-9]+ .*(critic/score/mean|actor/pg_loss):nan" "$WORK/train.log"; then
    echo "smoke FAILED: NaN in metrics" >&2; exit 1
fi
grep -Eq "step:${STEPS} .*critic/score/mean:" "$WORK/train.log" || { echo "smoke FAILED: no reward metric" >&2; exit 1; }
ls "$WORK"/validation_audio/*/sample_*.wav >/dev/null 2>&1 || { echo "smoke FAILED: validation wrote no audio" >&2; exit 1; }
echo "smoke ok: ${STEPS} GRPO steps scored by $SCORER_URL; log in $WORK/train.log"
