"""Checks to run before a training job starts, so a wrong setting fails in seconds, not hours.

- the scorer answers ``GET /v1/info`` and speaks protocol v1 (when the reward uses it),
- GRPO-style estimators have a group size ``actor_rollout_ref.rollout.n >= 2``,
- reward manager, reward function and failure policy agree,
- verl-omni's rollout is set up to produce what the reward reads (Qwen3-TTS: real weights,
  TP 1, a readable speaker embedding; Qwen3-Omni thinker: LoRA, where on, kept off the speech stack and encoders),
- a reward failure stops verl's v1 trainer (the fail-closed sampler is selected),
- the installed verl-omni registers the rollout, agent loop and pipeline the recipe names, and its
  ``AudioRewardManager`` reads the sample rate where the rollout puts it (:mod:`.omni_source`),
- the advantage estimator is one for token policies (not a diffusion estimator such as ``flow_grpo``),
- verl's rollout correction, when on, has the rollout log-probabilities it reweights with,
- the scorer does not share the training GPUs,
- the train/val parquet files exist and have the columns the reward needs, and every validation row
  names its split (the reward manager writes validation audio only for those),
- the model folder is local, its safetensors open, and a Qwen3-TTS one is the
  full Base model with its speaker encoder (:mod:`.model_folder`).

A recipe name composes verl-omni's ``omni_trainer`` with the recipe's launch
overrides (:mod:`.recipes.launch`), exactly what ``run.sh`` runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..protocol import SUPPORTED_VERSIONS
from ..scorer_client.settings import endpoint_of
from ..settings_flags import one_line
from . import scorer_speed
from .omni_source import TTS_INSTALL, audio_manager_problem, missing_registrations, package_dir, read_registrations
from .recipes.launch import EXTERNAL_MODULES
from .recipes.overrides import (
    ADV_ESTIMATOR,
    AGENT_LOOP,
    CALCULATE_LOG_PROBS,
    FAIL_CLOSED_MODULE,
    GROUP_SIZE,
    LOAD_FORMAT,
    LORA_EXCLUDE,
    LORA_RANK,
    LORA_TARGETS,
    MANAGER_NAME,
    MANAGER_PATH,
    MAX_FAILED_GROUPS,
    MODEL_PATH,
    PIPELINE_MODE,
    PIPELINE_NAME,
    REWARD_FN_NAME,
    REWARD_FN_PATH,
    ROLLOUT_CORRECTION,
    ROLLOUT_NAME,
    ROLLOUT_TP,
    SAMPLER_NAME,
    SAMPLER_PATH,
    SPEAKER_EMBEDDING,
    THINKER_OVERRIDES,
    TRAIN_FILES,
    TTS_LANGUAGE,
    TTS_OVERRIDES,
    VAL_FILES,
)
from .settings import (
    CONFIG_BLOCK,
    NO_URL,
    PluginSettings,
    block_of,
    lookup,
)


def _module_of(path: str | None) -> str | None:
    return path.removeprefix("pkg://") if path else None


# What a correct setup looks like is read from the recipes' override tables, the values the launch writes.
DIFFUSION_ESTIMATORS = ("flow_grpo", "dance_grpo")
"""verl-omni's ``DiffusionAdvantageEstimator`` values: they score denoising trajectories, not tokens."""
GROUP_ESTIMATORS = ("grpo", "grpo_masked", "grpo_passk", "rloo", "opo", "gpg", "rloo_vectorized", "grpo_vectorized")
AUDIO_MANAGER_MODULE = _module_of(TTS_OVERRIDES.value(MANAGER_PATH)) or ""
AUDIO_REWARD_FN = "audio_reward.trainer_plugin.reward_fn"
MCQ_REWARD_FN = _module_of(THINKER_OVERRIDES.value(REWARD_FN_PATH))
MCQ_FUNCTION = THINKER_OVERRIDES.value(REWARD_FN_NAME)
VERL_OMNI_HTTP_FN = "verl_omni.utils.reward_score.audio_http_scorer_client"
OMNI_ROLLOUT = TTS_OVERRIDES.value(ROLLOUT_NAME)
OMNI_MODULE = EXTERNAL_MODULES[0]
TTS_PIPELINE = TTS_OVERRIDES.value(PIPELINE_NAME)
TTS_ROLLOUT_TP = int(TTS_OVERRIDES.value(ROLLOUT_TP))
TTS_PIPELINE_MODE = TTS_OVERRIDES.value(PIPELINE_MODE)
THINKER_PIPELINE = THINKER_OVERRIDES.value(PIPELINE_NAME)
THINKER_FROZEN = tuple(p.removeprefix(".*").removesuffix(".*")
                       for p in THINKER_OVERRIDES.value(LORA_EXCLUDE).split("|"))
"""The modules the thinker recipe keeps LoRA off (its ``exclude_modules`` is ``.*NAME.*|...``)."""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    message: str
    warning: bool = False
    """Passed, but worth reading before the launch (a CPU scorer for a GPU run)."""

    @property
    def status(self) -> str:
        """``ok``, ``WARN`` or ``FAIL``: how the command line tags the check."""
        return "FAIL" if not self.ok else "WARN" if self.warning else "ok"


def uses_audio_manager(config: Any) -> bool:
    name = str(lookup(config, MANAGER_NAME, ""))
    module = _module_of(lookup(config, MANAGER_PATH)) or ""
    return name in ("audio_score", TTS_OVERRIDES.value(MANAGER_NAME)) or module.startswith(AUDIO_MANAGER_MODULE)


def _scorer_fn(config: Any) -> str | None:
    fn_module = _module_of(lookup(config, REWARD_FN_PATH))
    return fn_module if fn_module in (AUDIO_REWARD_FN, VERL_OMNI_HTTP_FN) else None


def scorer_urls(config: Any) -> list[str]:
    """The scorer URL(s) the config's reward will call (empty when it calls none).

    Raises ValueError, naming the config key, when the plugin's settings cannot
    be built or verl-omni's ``server_url`` is not a URL.
    """
    if uses_audio_manager(config):
        try:
            return list(PluginSettings.from_config(config).server_url)
        except ValueError as exc:  # no URL, or a bad value
            raise ValueError(f"reward.{CONFIG_BLOCK}: {one_line(exc)}") from None
    fn = _scorer_fn(config)
    key = "reward.custom_reward_function.reward_kwargs.server_url"
    url = str(lookup(config, key, "") or "")
    if not (fn and url):
        return []
    if fn != VERL_OMNI_HTTP_FN:
        return [url]
    try:
        return [endpoint_of(url).base]  # verl-omni's client posts to the full /score URL given
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None


def _info_of(url: str) -> dict[str, Any]:
    from ..scorer_client import ScorerClient

    with ScorerClient(url, timeout=10.0, max_retries=0) as client:
        return client.info()


def _scorer_check(url: str, info: dict[str, Any], config: Any) -> Check:
    """One scorer's ``/v1/info`` answer: the protocol it speaks, and whether it shares the training GPUs."""
    versions = info.get("supported_protocol_versions") or [info.get("protocol_version")]
    versions = [str(v) for v in versions if v is not None]
    if not any(v.split(".")[0] in SUPPORTED_VERSIONS for v in versions):
        return Check("scorer", False,
                     f"{url}: speaks protocol {versions or 'unknown'}, need {list(SUPPORTED_VERSIONS)}")
    engine: dict[str, Any] = info["engine"] if isinstance(info.get("engine"), dict) else {}
    if shared := colocation_problem(url, str(engine.get("device", "")), config):
        return Check("scorer", False, shared)
    model = engine.get("model_id") or engine.get("name") or "?"
    return Check("scorer", True, f"{url}: protocol {', '.join(versions)}, model {model}")


def speed_check(url: str, info: dict[str, Any], config: Any, *, info_fn: Callable[[str], dict[str, Any]],
                budget_s: float) -> Check:
    """The scorer's device, engine and throughput, and the seconds a training step's clips take it; a warning
    for a CPU scorer behind a GPU trainer (:mod:`.scorer_speed`)."""
    load = scorer_speed.step_load(config)
    try:
        speed = scorer_speed.measure(url, info, load, budget_s=budget_s, info_fn=info_fn)
    except Exception as exc:  # noqa: BLE001 - any failure to score the probe is the check's answer
        return Check("scorer speed", False, f"{url}: the scorer answered /v1/info but could not score the "
                                            f"throughput probe: {one_line(exc)}")
    message = f"{speed.describe()}; {scorer_speed.step_estimate(load, speed.audio_s_per_s)}"
    if speed.device.startswith("cpu") and scorer_speed.trainer_on_gpu(config):
        return Check("scorer speed", True, f"{message}. The scorer runs on the CPU and the trainer on GPUs: restart "
                                           "it on a GPU of its own (audio-reward serve --device cuda)", warning=True)
    return Check("scorer speed", True, message)


def check_server(config: Any, info_fn: Callable[[str], dict[str, Any]] = _info_of, *,
                 probe_s: float | None = None) -> list[Check]:
    """The scorer(s) the reward calls: protocol, GPU sharing and, for a training config, speed.

    ``probe_s`` bounds the throughput probe of a scorer that has measured nothing yet (default
    ``AUDIO_REWARD_PREFLIGHT_PROBE_S``, else 60 s; 0 reads ``/v1/info`` only).
    """
    if not (uses_audio_manager(config) or _scorer_fn(config) is not None):
        return [Check("scorer", True, "the reward does not call a scorer server")]
    try:
        urls = scorer_urls(config)
    except ValueError as exc:
        return [Check("scorer", False, str(exc))]
    if not urls:
        return [Check("scorer", False, NO_URL)]
    try:
        budget_s = scorer_speed.probe_budget() if probe_s is None else probe_s
    except ValueError as exc:
        return [Check("scorer speed", False, str(exc))]
    checks = []
    for url in urls:
        try:
            info = info_fn(url)
        except Exception as exc:  # noqa: BLE001 - every failure is reported, none is fatal here
            checks.append(Check("scorer", False, f"{url}: GET /v1/info failed: {exc}"))
            continue
        checks.append(_scorer_check(url, info, config))
        if checks[-1].ok and scorer_speed.step_load(config) is not None:
            checks.append(speed_check(url, info, config, info_fn=info_fn, budget_s=budget_s))
    return checks


def _is_this_machine(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", "127.0.0.1", "::1", "0.0.0.0") or host.startswith("127."):
        return True
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    with contextlib.suppress(OSError):
        names.add(socket.gethostbyname(socket.gethostname()))
    return host in names


def machine_gpus() -> int | None:
    """The machine's GPUs as ``nvidia-smi -L`` lists them (all of them, whatever this process may see)."""
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    gpus = [line for line in done.stdout.splitlines() if line.startswith("GPU ")]
    return len(gpus) if done.returncode == 0 and gpus else None


def colocation_problem(url: str, device: str, config: Any, gpus: int | None = None) -> str | None:
    """Why a scorer on ``device`` at ``url`` would share a GPU with the trainer; None when it would not.

    ``gpus`` is the machine's GPU count (``nvidia-smi -L`` when not given); a trainer that takes every one of
    them leaves a scorer on this machine's CUDA no GPU of its own, and vLLM's reservation on that GPU
    (``gpu_memory_utilization``) does not leave room for an ASR model beside it.
    """
    if not device.startswith("cuda") or not _is_this_machine(url):
        return None
    gpus = machine_gpus() if gpus is None else gpus
    wanted = int(lookup(config, "trainer.n_gpus_per_node", 0) or 0)
    if gpus is None or wanted < gpus:
        return None
    return (f"{url}: the scorer runs on this machine's GPU ({device}) and trainer.n_gpus_per_node={wanted} takes "
            f"all {gpus} GPUs, so the two share one: start the scorer on a GPU of its own (CUDA_VISIBLE_DEVICES) "
            f"and set NUM_GPUS={gpus - 1}, or run the scorer on another machine")


def check_group_size(config: Any) -> list[Check]:
    estimator = str(lookup(config, ADV_ESTIMATOR, ""))
    n = int(lookup(config, GROUP_SIZE, 1))
    if estimator in DIFFUSION_ESTIMATORS:
        return [Check("group size", False, f"{ADV_ESTIMATOR}={estimator} is verl-omni's estimator for diffusion "
                                           "rollouts (denoising steps, no token log-probabilities); the TTS talker "
                                           "and the thinker are token policies: use grpo")]
    if estimator in GROUP_ESTIMATORS and n < 2:
        return [Check("group size", False, f"{ADV_ESTIMATOR}={estimator} compares samples of one prompt: "
                                           f"{GROUP_SIZE} must be >= 2, got {n}")]
    return [Check("group size", True, f"adv_estimator={estimator}, rollout.n={n}")]


def _manager_wiring(config: Any, fn_module: str | None) -> list[Check]:
    """Our ``audio_score`` manager: its settings block, no reward function beside it, a masking estimator."""
    try:
        # A missing URL is the scorer check's to report; the rest of the block is checked here.
        settings = PluginSettings.from_config(config, stand_in_url="http://scorer.invalid")
    except (ValueError, TypeError) as exc:
        return [Check("reward", False, f"reward.{CONFIG_BLOCK}: {exc}")]
    checks = []
    if fn_module:
        checks.append(Check("reward", False, f"reward manager audio_score scores through the scorer and ignores "
                                             f"reward.custom_reward_function ({fn_module}); remove it"))
    if masking := settings.masking_problem(config):
        checks.append(Check("reward", False, masking))
    return checks or [Check("reward", True, f"audio_score manager, failure_policy={settings.failure_policy.value}")]


def _function_wiring(config: Any, fn_module: str | None) -> list[Check]:
    """Any other manager: our settings block unused, and the reward function's own keywords."""
    checks = []
    url = str(lookup(config, "reward.custom_reward_function.reward_kwargs.server_url", "") or "")
    if block_of(config):
        checks.append(Check("reward", False, f"reward.{CONFIG_BLOCK} is set but the reward manager is "
                                             f"{lookup(config, MANAGER_NAME)!r}, not audio_score"))
    if _scorer_fn(config) and not url:
        checks.append(Check("reward", False, f"{fn_module}.compute_score needs "
                                             "+reward.custom_reward_function.reward_kwargs.server_url"))
    if fn_module == VERL_OMNI_HTTP_FN and url and not url.rstrip("/").endswith("/score"):
        checks.append(Check("reward", False, f"verl-omni's audio_http_scorer_client posts to the URL as given: "
                                             f"point it at the scorer's /score path ({url.rstrip('/')}/score)"))
    if fn_module == MCQ_REWARD_FN and lookup(config, REWARD_FN_NAME) != MCQ_FUNCTION:
        checks.append(Check("reward", False, f"the multiple-choice reward function is named {MCQ_FUNCTION}"))
    return checks or [Check("reward", True, f"manager {lookup(config, MANAGER_NAME)}, "
                                            f"function {fn_module or 'verl default'}")]


def check_reward_wiring(config: Any) -> list[Check]:
    wiring = _manager_wiring if uses_audio_manager(config) else _function_wiring
    return wiring(config, _module_of(lookup(config, REWARD_FN_PATH)))


def _speaker_problem(path: str, model_path: Any = None) -> str | None:
    from .model_folder import read_config, speaker_width

    file = Path(path).expanduser()
    if not file.is_file():
        return f"tts_spk_embed_path {file} does not exist (make one with `audio-reward tts-speaker REF.wav --out FILE`)"
    try:
        from .tts_speaker import read_speaker_embedding

        vector = read_speaker_embedding(file)
    except (ValueError, OSError) as exc:
        return f"tts_spk_embed_path {file}: {exc}"
    if not vector:
        return f"tts_spk_embed_path {file} holds an empty vector"
    # the rollout puts the vector in the talker's speaker slot: any other width fails at the first rollout (a
    # missing or unreadable config.json gives no width here: the model check reports it, weights included)
    width = speaker_width(read_config(str(model_path))) if model_path else None
    if width is not None and len(vector) != width:
        return (f"tts_spk_embed_path {file} has {len(vector)} values, the talker of {model_path} takes {width} "
                f"(talker_config.hidden_size): make it with this model (audio-reward tts-speaker REF.wav --out "
                f"FILE --model {model_path})")
    return None


def _tts_rollout_problems(config: Any) -> list[str]:
    """``qwen3_tts_rl``: real weights, unsharded, full pipeline, a speaker that fits the talker, the Auto layout."""
    problems = []
    if str(lookup(config, LOAD_FORMAT, "")) == "dummy":
        problems.append(f"{LOAD_FORMAT}=dummy: verl-omni syncs trained weights to stage 0 only, so the frozen "
                        "code2wav stage would decode with random weights and every reward would score noise; use "
                        f"load_format={TTS_OVERRIDES.value(LOAD_FORMAT)}")
    tp = int(lookup(config, ROLLOUT_TP, 1))
    if tp > TTS_ROLLOUT_TP:
        problems.append(f"{ROLLOUT_TP}={tp}: pipeline {TTS_PIPELINE} runs its talker and code2wav stages "
                        f"unsharded; set it to {TTS_ROLLOUT_TP}")
    mode = str(lookup(config, PIPELINE_MODE, TTS_PIPELINE_MODE))
    if mode != TTS_PIPELINE_MODE:
        problems.append(f"pipeline {TTS_PIPELINE} supports only pipeline_mode={TTS_PIPELINE_MODE}, got {mode}")
    speaker = lookup(config, SPEAKER_EMBEDDING)
    problem = _speaker_problem(str(speaker), lookup(config, MODEL_PATH)) if speaker else (
        f"{TTS_PIPELINE} needs +{SPEAKER_EMBEDDING} (the fixed voice of every rollout)")
    if problem:
        problems.append(problem)
    language = str(lookup(config, TTS_LANGUAGE, ""))
    if language.lower() != "auto":
        problems.append(f"{TTS_LANGUAGE}={language or '(unset)'}: verl-omni's {TTS_PIPELINE} trains only the "
                        "Auto prompt layout")
    return problems


def _thinker_rollout_problems(config: Any) -> list[str]:
    """``qwen3_omni_moe``: LoRA on the thinker's own modules only."""
    if int(lookup(config, LORA_RANK, 0)) <= 0:
        return []
    problems = []
    if missing := [m for m in THINKER_FROZEN if m not in str(lookup(config, LORA_EXCLUDE, "") or "")]:
        problems.append(f"{LORA_EXCLUDE} must keep LoRA off {', '.join(missing)} (the thinker alone is trained)")
    if str(lookup(config, LORA_TARGETS, "all-linear")) == "all-linear":
        problems.append(f"{LORA_TARGETS}=all-linear also matches the talker and encoders: list the thinker's "
                        "modules")
    return problems


def check_rollout(config: Any, environ: Mapping[str, str] | None = None) -> list[Check]:
    """verl-omni's vLLM-Omni rollout: settings without which the reward scores noise or nothing."""
    environ = os.environ if environ is None else environ
    if str(lookup(config, ROLLOUT_NAME, "")) != OMNI_ROLLOUT:
        return []
    problems = []
    if OMNI_MODULE not in [m.strip() for m in environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",")]:
        problems.append(f"export VERL_USE_EXTERNAL_MODULES={OMNI_MODULE}: verl-omni has no verl.plugins entry "
                        "point, so Ray workers would never register its agent loops and model adapters")
    pipeline = str(lookup(config, PIPELINE_NAME, ""))
    summary = None
    if pipeline == TTS_PIPELINE:
        problems += _tts_rollout_problems(config)
        summary = (f"{TTS_PIPELINE}: load_format={lookup(config, LOAD_FORMAT, '')}, "
                   f"TP {lookup(config, ROLLOUT_TP, 1)}, "
                   f"speaker {lookup(config, SPEAKER_EMBEDDING)}")
    elif pipeline == THINKER_PIPELINE:
        problems += _thinker_rollout_problems(config)
        rank = int(lookup(config, LORA_RANK, 0))
        summary = (f"{THINKER_PIPELINE}: LoRA rank {rank} on {list(lookup(config, LORA_TARGETS, 'all-linear'))}"
                   if rank > 0 else f"{THINKER_PIPELINE}: the full backbone (lora_rank 0)")
    if problems:
        return [Check("rollout", False, p) for p in problems]
    return [Check("rollout", True, summary)] if summary else []


def check_fail_closed(config: Any) -> list[Check]:
    """verl's v1 trainer trains on when a reward raises; the fail-closed sampler stops it."""
    mode = str(lookup(config, "trainer.v1.trainer_mode", "sync"))
    if not bool(lookup(config, "trainer.use_v1", False)) and mode != "omni_sync":
        return []
    name = str(lookup(config, SAMPLER_NAME, "") or "")
    if _module_of(lookup(config, SAMPLER_PATH)) != FAIL_CLOSED_MODULE:
        return [Check("fail-closed", False, "verl's v1 trainer marks a group whose reward raised as failed and "
                                            f"trains on without it: set {SAMPLER_PATH}="
                                            f"pkg://{FAIL_CLOSED_MODULE} (see docs/training.md)")]
    from . import fail_closed

    expected = fail_closed.SAMPLER_FOR_MODE.get(mode, fail_closed.DEFAULT_SAMPLER)
    if name != expected:
        return [Check("fail-closed", False, f"trainer mode {mode} needs custom_sampler.name={expected} "
                                            f"(it keeps verl's own sampling for that mode), got {name or '(unset)'}")]
    base = getattr(fail_closed, expected).verl_base()
    try:
        fail_closed.refuse_unsupported(base, fail_closed.ground_problems(base))
    except fail_closed.UnsupportedVerlError as exc:
        return [Check("fail-closed", False, str(exc))]
    limit = lookup(config, MAX_FAILED_GROUPS, 0)
    return [Check("fail-closed", True, f"{name}: the run stops after {int(limit) + 1} failed group(s)")]


def _verl_agent_loops() -> frozenset[str]:
    """The agent loops verl itself registers (``single_turn_agent``...); empty where verl does not import."""
    try:
        from verl.experimental.agent_loop import agent_loop
    except ImportError:
        return frozenset()
    return frozenset(getattr(agent_loop, "_agent_loop_registry", {}))


def check_omni_install(config: Any) -> list[Check]:
    """verl-omni's tree registers what the config names: else the run fails once Ray and FSDP are up."""
    if str(lookup(config, ROLLOUT_NAME, "")) != OMNI_ROLLOUT:
        return []
    package = package_dir()
    if package is None:
        return [Check("verl-omni", False, "verl-omni is not installed here and VERL_OMNI_SRC names no checkout: "
                                          "see docs/training.md section 1")]
    found = read_registrations(package)
    pipeline = str(lookup(config, PIPELINE_NAME, "") or "") or None
    loop = str(lookup(config, AGENT_LOOP, "") or "") or None
    missing = missing_registrations(found, rollout=OMNI_ROLLOUT, pipeline=pipeline,
                                    agent_loop=None if loop in _verl_agent_loops() else loop)
    hint = TTS_INSTALL if pipeline == TTS_PIPELINE else "install a verl-omni that registers them"
    checks = [Check("verl-omni", False, f"{found.describe()} registers no {', '.join(missing)}: {hint}")] \
        if missing else []
    way_b = (_module_of(lookup(config, MANAGER_PATH)) or "").startswith("verl_omni.reward_loop.reward_manager")
    if way_b and (problem := audio_manager_problem(package)):
        checks.append(Check("verl-omni", False, f"way (b): {problem}: {TTS_INSTALL}"))
    return checks or [Check("verl-omni", True, f"{found.describe()} registers rollout {OMNI_ROLLOUT}, "
                                               f"pipeline {pipeline}, agent loop {loop}")]


def check_rollout_correction(config: Any) -> list[Check]:
    """verl reweights by rollout log-probabilities; without them its rollout correction silently does nothing."""
    correction = lookup(config, ROLLOUT_CORRECTION)
    if not correction or not (lookup(correction, "rollout_is") or lookup(correction, "rollout_rs")):
        return []
    if not bool(lookup(config, CALCULATE_LOG_PROBS, False)):
        return [Check("rollout correction", False, f"{ROLLOUT_CORRECTION}.rollout_is/rollout_rs is set but "
                                                   f"{CALCULATE_LOG_PROBS} is false: verl skips the correction "
                                                   "when the rollout returns no log-probabilities; set it true")]
    return [Check("rollout correction", True, f"rollout_is={lookup(correction, 'rollout_is')}, threshold "
                                              f"{lookup(correction, 'rollout_is_threshold')}, "
                                              f"rollout_rs={lookup(correction, 'rollout_rs')}")]


def required_columns(config: Any) -> dict[str, str]:
    """Column → why it is needed, for the config's reward and data settings."""
    cols = {str(lookup(config, "data.prompt_key", "prompt")): "data.prompt_key", "data_source": "reward routing"}
    fn_module = _module_of(lookup(config, REWARD_FN_PATH))
    if uses_audio_manager(config) or fn_module in (AUDIO_REWARD_FN, MCQ_REWARD_FN):
        cols["reward_model"] = "target text / answer (reward_model.ground_truth)"
    if fn_module == MCQ_REWARD_FN:
        cols["extra_info"] = "the options (extra_info.options)"
        cols[str(lookup(config, "data.audio_key", "audios"))] = "audio clips for the <audio> placeholders"
    return cols


def check_data(config: Any) -> list[Check]:
    import pyarrow.parquet as pq

    checks = []
    for key in (TRAIN_FILES, VAL_FILES):
        files = lookup(config, key)
        if isinstance(files, str) and not files.strip():  # a recipe variable left unset
            checks.append(Check("data", False, f"{key} is empty"))
            continue
        files = [files] if isinstance(files, str) else list(files or [])
        checks += [_data_file_check(key, Path(str(f)).expanduser(), config, pq.read_table) for f in files]
    return checks


def _data_file_check(key: str, path: Path, config: Any, read_table: Callable[[Path], Any]) -> Check:
    """One parquet file of ``key``: there, readable, with the columns the reward needs and usable rows."""
    if not path.is_file():
        return Check("data", False, f"{key}: {path} does not exist")
    try:
        table = read_table(path)
    except Exception as exc:  # noqa: BLE001
        return Check("data", False, f"{key}: {path} is not readable parquet: {exc}")
    missing = [f"{c} ({why})" for c, why in required_columns(config).items() if c not in table.column_names]
    if missing:
        return Check("data", False, f"{path}: missing column(s) {', '.join(missing)}")
    problem = _row_problem(table.slice(0, 1).to_pylist()[0] if table.num_rows else None, config)
    if not problem and key == VAL_FILES:
        problem = _split_problem(table, config)
    return Check("data", not problem, f"{path}: {problem or f'{table.num_rows} rows, columns ok'}")


def _split_problem(table: Any, config: Any) -> str | None:
    """Validation rows the audio manager would not recognise: verl gives per-sample rewards no ``validate``
    flag, so ``extra_info.split`` is the only sign, and without it a row writes no audio and no metrics."""
    if not uses_audio_manager(config):
        return None
    try:
        splits = PluginSettings.from_config(config, stand_in_url="http://scorer.invalid").validation_splits
    except (ValueError, TypeError):
        return None  # the reward check reports the settings
    rows = table.column("extra_info").to_pylist() if "extra_info" in table.column_names else [None] * table.num_rows
    unnamed = [i for i, info in enumerate(rows) if not isinstance(info, dict) or info.get("split") not in splits]
    if not unnamed:
        return None
    return (f"{len(unnamed)} of {len(rows)} validation rows (first: row {unnamed[0]}) have no extra_info.split in "
            f"{list(splits)}: the reward manager writes validation audio and metrics only for those rows (the "
            "recipes' prepare_data writes split=val)")


def _row_problem(row: dict[str, Any] | None, config: Any) -> str | None:
    if row is None:
        return "no rows"
    if "reward_model" in row and not (row["reward_model"] or {}).get("ground_truth"):
        return "first row has no reward_model.ground_truth"
    audio_key = str(lookup(config, "data.audio_key", "audios"))
    prompt = json.dumps(row.get(str(lookup(config, "data.prompt_key", "prompt"))), ensure_ascii=False)
    if "<audio>" in prompt and not row.get(audio_key):
        return f"the prompt has an <audio> placeholder but column {audio_key!r} is empty"
    return None


def check_model(config: Any) -> list[Check]:
    """``actor_rollout_ref.model.path``: one failed check per problem of the folder."""
    from .model_folder import training_model_problems

    path = lookup(config, MODEL_PATH)
    if not path:
        return [Check("model", False, f"{MODEL_PATH} is not set")]
    problems = training_model_problems(str(path))
    return [Check("model", False, p) for p in problems] or [Check("model", True, f"{path}: weights readable")]


def _not_installed(name: object) -> str:
    return (f"{name} is not installed in this environment ({sys.executable}); run preflight in the trainer "
            "environment, where verl is (scripts/envs/verl.sh builds one)")


def _guarded(name: str, check: Callable[[Any], list[Check]], config: Any) -> list[Check]:
    """``check(config)``; a library it needs that this environment lacks is its failed check, so the rest run."""
    try:
        return check(config)
    except ImportError as exc:
        return [Check(name, False, _not_installed(exc.name or exc))]


def run_checks(config: Any, *, skip_server: bool = False, skip_data: bool = False,
               skip_model: bool = False) -> list[Check]:
    """Every check of ``config``; each reports its own problems, and none stops the others."""
    skipped = {"model": skip_model, "scorer": skip_server, "data": skip_data}
    named: list[tuple[str, Callable[[Any], list[Check]]]] = [
        ("group size", check_group_size), ("reward", check_reward_wiring), ("rollout", check_rollout),
        ("verl-omni", check_omni_install), ("rollout correction", check_rollout_correction),
        ("fail-closed", check_fail_closed), ("model", check_model), ("scorer", check_server), ("data", check_data)]
    return [check for name, run in named if not skipped.get(name) for check in _guarded(name, run, config)]


def compose_for_checks(config: str, overrides: Sequence[str] = ()) -> tuple[Any | None, list[Check]]:
    """The config the checks run on, and what composing it found wrong.

    The launch's own composition (:func:`load_config`) when it succeeds, with no problem.  When it does not
    (verl-omni or hydra not installed here, a recipe variable unset), that is a failed check, and a recipe's
    checks still run on what is known without it: its variables as set (missing ones empty), composed into
    verl-omni's config where that is here, else the recipe's overrides alone.  So one run lists every
    problem, as ``run.sh``'s dry run lists every missing variable.  A YAML file that does not compose gives
    no config to check (None).
    """
    from .recipes.launch import RECIPES, LaunchError, overrides_config, plan, resolve

    try:
        return load_config(config, overrides), []
    except Exception as exc:  # noqa: BLE001 - a config that does not compose is the first failed check
        # where hydra is missing, the failed check names the environment to run preflight in
        hydra = exc.name if isinstance(exc, ModuleNotFoundError) and exc.name in ("hydra", "omegaconf") else None
        checks = [Check("config", False, _not_installed(hydra) if hydra else one_line(exc))]
        variables_checked = isinstance(exc, LaunchError)
    if config not in RECIPES:
        return None, checks
    if not variables_checked:
        try:
            resolve(config)
        except LaunchError as exc:
            checks.append(Check("config", False, str(exc)))
    try:
        return load_config(config, overrides, strict=False), checks
    except LaunchError:  # an override that cannot be given at all (reported above)
        return None, checks
    except Exception:  # noqa: BLE001 - reported above; what the recipe itself sets can still be checked
        return overrides_config(plan(config, overrides, strict=False).overrides), checks


def omni_config_dir() -> Path:
    """verl-omni's Hydra config folder: the installed package's, else ``$VERL_OMNI_SRC/verl_omni/trainer/config``."""
    package = package_dir()
    if package is not None and (package / "trainer" / "config" / "omni_trainer.yaml").is_file():
        return package / "trainer" / "config"
    if source := os.environ.get("VERL_OMNI_SRC"):
        raise FileNotFoundError(f"VERL_OMNI_SRC={source} has no verl_omni/trainer/config/omni_trainer.yaml")
    raise ModuleNotFoundError("the recipes launch verl-omni's omni_trainer config: install verl-omni in this "
                              "environment (docs/training.md) or set VERL_OMNI_SRC to a checkout of it")


def _import_verl_for_checkout() -> None:
    """Import verl (omni_trainer's ``pkg://verl.trainer.config``) while verl-omni is only a checkout here.

    ``import verl`` imports every module in ``VERL_USE_EXTERNAL_MODULES``; the
    run exports ``verl_omni`` there, which a config-only checkout cannot import.
    """
    saved = os.environ.get("VERL_USE_EXTERNAL_MODULES")
    if saved is not None:
        os.environ["VERL_USE_EXTERNAL_MODULES"] = ",".join(m for m in saved.split(",") if m.strip() != "verl_omni")
    try:
        import verl  # noqa: F401
    finally:
        if saved is not None:
            os.environ["VERL_USE_EXTERNAL_MODULES"] = saved


def load_config(config: str, overrides: Sequence[str] = (), *, strict: bool = True) -> Any:
    """Compose ``config``: a recipe name (``qwen3_tts_grpo``: verl-omni's ``omni_trainer`` with the recipe's
    launch overrides, then ``overrides``, as ``run.sh`` launches it) or a Hydra YAML file path.

    ``strict=False``: a recipe's unset variables are left empty instead of raising (:func:`compose_for_checks`).
    """
    from hydra import compose, initialize_config_dir

    from .recipes.launch import RECIPES, plan

    path = Path(config)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise FileNotFoundError(f"config file {path} does not exist")
        directory, name, all_overrides = path.resolve().parent, path.stem, list(overrides)
    elif config in RECIPES:
        directory, name = omni_config_dir(), "omni_trainer"
        all_overrides = plan(config, overrides, strict=strict).overrides
        if importlib.util.find_spec("verl_omni") is None:
            _import_verl_for_checkout()
    else:
        raise ValueError(f"{config!r} is neither a YAML file nor a recipe ({', '.join(sorted(RECIPES))})")
    with initialize_config_dir(config_dir=str(directory), version_base=None):
        return compose(config_name=name, overrides=all_overrides)
