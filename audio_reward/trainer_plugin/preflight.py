"""Checks to run before a training job starts, so a wrong setting fails in seconds, not hours.

- the scorer answers ``GET /v1/info`` and speaks protocol v1 (when the reward uses it),
- GRPO-style estimators have a group size ``actor_rollout_ref.rollout.n >= 2``,
- reward manager, reward function and failure policy agree,
- the train/val parquet files exist and have the columns the reward needs,
- the model folder is local, its safetensors open, and a Qwen3-TTS one is the
  full Base model with its speaker encoder (:mod:`.model_folder`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..protocol import SUPPORTED_VERSIONS
from .settings import CONFIG_BLOCK, MASKING_ESTIMATORS, FailurePolicy, PluginSettings, block_of

GROUP_ESTIMATORS = ("grpo", "grpo_masked", "grpo_passk", "rloo", "opo", "gpg", "rloo_vectorized", "grpo_vectorized")
AUDIO_MANAGERS = ("audio_score", "AudioScoreRewardManager")
AUDIO_REWARD_FN = "audio_reward.trainer_plugin.reward_fn"
MCQ_REWARD_FN = "audio_reward.trainer_plugin.mcq"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    message: str


def _get(config: Any, dotted: str, default: Any = None) -> Any:
    node = config
    for part in dotted.split("."):
        if node is None or not hasattr(node, "get"):
            return default
        node = node.get(part)
    return default if node is None else node


def _module_of(path: str | None) -> str | None:
    if not path:
        return None
    return path[len("pkg://"):] if path.startswith("pkg://") else path


def uses_audio_manager(config: Any) -> bool:
    name = str(_get(config, "reward.reward_manager.name", ""))
    module = _module_of(_get(config, "reward.reward_manager.module.path")) or ""
    return name in AUDIO_MANAGERS or module.startswith("audio_reward.trainer_plugin.reward_manager")


def scorer_urls(config: Any) -> list[str]:
    """The scorer URL(s) the config's reward will call (empty when it calls none)."""
    fn_module = _module_of(_get(config, "reward.custom_reward_function.path"))
    if uses_audio_manager(config):
        return list(PluginSettings.from_config(config).server_url)
    if fn_module == AUDIO_REWARD_FN:
        url = _get(config, "reward.custom_reward_function.reward_kwargs.server_url")
        return [str(url)] if url else []
    return []


def check_server(config: Any, info_fn: Callable[[str], dict[str, Any]] | None = None) -> list[Check]:
    urls = scorer_urls(config)
    needs = uses_audio_manager(config) or _module_of(_get(config, "reward.custom_reward_function.path")) == AUDIO_REWARD_FN
    if not needs:
        return [Check("scorer", True, "the reward does not call a scorer server")]
    if not urls:
        return [Check("scorer", False, f"no scorer URL: set reward.{CONFIG_BLOCK}.server_url (or AUDIO_REWARD_URL)")]
    if info_fn is None:
        from ..scorer_client import ScorerClient

        def info_fn(url: str) -> dict[str, Any]:
            with ScorerClient(url, timeout=10.0, max_retries=0) as client:
                return client.info()

    checks = []
    for url in urls:
        try:
            info = info_fn(url)
        except Exception as exc:  # noqa: BLE001 - every failure is reported, none is fatal here
            checks.append(Check("scorer", False, f"{url}: GET /v1/info failed: {exc}"))
            continue
        versions = info.get("supported_protocol_versions") or [info.get("protocol_version")]
        versions = [str(v) for v in versions if v is not None]
        if not any(v.split(".")[0] in SUPPORTED_VERSIONS for v in versions):
            checks.append(Check("scorer", False, f"{url}: speaks protocol {versions or 'unknown'}, need {list(SUPPORTED_VERSIONS)}"))
        else:
            engine = info.get("engine") if isinstance(info.get("engine"), dict) else {}
            model = engine.get("model_id") or engine.get("name") or "?"
            checks.append(Check("scorer", True, f"{url}: protocol {', '.join(versions)}, model {model}"))
    return checks


def check_group_size(config: Any) -> list[Check]:
    estimator = str(_get(config, "algorithm.adv_estimator", ""))
    n = int(_get(config, "actor_rollout_ref.rollout.n", 1))
    if estimator in GROUP_ESTIMATORS and n < 2:
        return [Check("group size", False, f"algorithm.adv_estimator={estimator} compares samples of one prompt: "
                                           f"actor_rollout_ref.rollout.n must be >= 2, got {n}")]
    return [Check("group size", True, f"adv_estimator={estimator}, rollout.n={n}")]


def check_reward_wiring(config: Any) -> list[Check]:
    checks: list[Check] = []
    fn_module = _module_of(_get(config, "reward.custom_reward_function.path"))
    estimator = str(_get(config, "algorithm.adv_estimator", ""))
    if uses_audio_manager(config):
        try:
            settings = PluginSettings.from_config(config)
        except (ValueError, TypeError) as exc:
            return [Check("reward", False, f"reward.{CONFIG_BLOCK}: {exc}")]
        if fn_module:
            checks.append(Check("reward", False, f"reward manager audio_score scores through the scorer and ignores "
                                                 f"reward.custom_reward_function ({fn_module}); remove it"))
        if settings.failure_policy is FailurePolicy.MASK and estimator not in MASKING_ESTIMATORS:
            checks.append(Check("reward", False, f"failure_policy=mask needs algorithm.adv_estimator in "
                                                 f"{list(MASKING_ESTIMATORS)}, got {estimator}"))
        if not checks:
            checks.append(Check("reward", True, f"audio_score manager, failure_policy={settings.failure_policy.value}"))
        return checks
    if block_of(config):
        checks.append(Check("reward", False, f"reward.{CONFIG_BLOCK} is set but the reward manager is "
                                             f"{_get(config, 'reward.reward_manager.name')!r}, not audio_score"))
    if fn_module == AUDIO_REWARD_FN and not _get(config, "reward.custom_reward_function.reward_kwargs.server_url"):
        checks.append(Check("reward", False, "reward_fn.compute_score needs "
                                             "+reward.custom_reward_function.reward_kwargs.server_url"))
    if fn_module == MCQ_REWARD_FN and _get(config, "reward.custom_reward_function.name") != "compute_score":
        checks.append(Check("reward", False, "the multiple-choice reward function is named compute_score"))
    if not checks:
        checks.append(Check("reward", True, f"manager {_get(config, 'reward.reward_manager.name')}, "
                                            f"function {fn_module or 'verl default'}"))
    return checks


def required_columns(config: Any) -> dict[str, str]:
    """Column → why it is needed, for the config's reward and data settings."""
    cols = {str(_get(config, "data.prompt_key", "prompt")): "data.prompt_key", "data_source": "reward routing"}
    fn_module = _module_of(_get(config, "reward.custom_reward_function.path"))
    if uses_audio_manager(config) or fn_module in (AUDIO_REWARD_FN, MCQ_REWARD_FN):
        cols["reward_model"] = "target text / answer (reward_model.ground_truth)"
    if fn_module == MCQ_REWARD_FN:
        cols["extra_info"] = "the options (extra_info.options)"
        cols[str(_get(config, "data.audio_key", "audios"))] = "audio clips for the <audio> placeholders"
    return cols


def check_data(config: Any) -> list[Check]:
    import pyarrow.parquet as pq

    checks = []
    needed = required_columns(config)
    for key in ("data.train_files", "data.val_files"):
        files = _get(config, key)
        files = [files] if isinstance(files, str) else list(files or [])
        for f in files:
            path = Path(str(f)).expanduser()
            if not path.is_file():
                checks.append(Check("data", False, f"{key}: {path} does not exist"))
                continue
            try:
                table = pq.read_table(path)
            except Exception as exc:  # noqa: BLE001
                checks.append(Check("data", False, f"{key}: {path} is not readable parquet: {exc}"))
                continue
            missing = [f"{c} ({why})" for c, why in needed.items() if c not in table.column_names]
            if missing:
                checks.append(Check("data", False, f"{path}: missing column(s) {', '.join(missing)}"))
                continue
            problem = _row_problem(table.slice(0, 1).to_pylist()[0] if table.num_rows else None, config)
            if problem:
                checks.append(Check("data", False, f"{path}: {problem}"))
            else:
                checks.append(Check("data", True, f"{path}: {table.num_rows} rows, columns ok"))
    return checks


def _row_problem(row: dict[str, Any] | None, config: Any) -> str | None:
    if row is None:
        return "no rows"
    if "reward_model" in row and not (row["reward_model"] or {}).get("ground_truth"):
        return "first row has no reward_model.ground_truth"
    audio_key = str(_get(config, "data.audio_key", "audios"))
    prompt = json.dumps(row.get(str(_get(config, "data.prompt_key", "prompt"))), ensure_ascii=False)
    if "<audio>" in prompt and not row.get(audio_key):
        return f"the prompt has an <audio> placeholder but column {audio_key!r} is empty"
    return None


def check_model(config: Any) -> list[Check]:
    """``actor_rollout_ref.model.path``: one failed check per problem of the folder."""
    from .model_folder import training_model_problems

    path = _get(config, "actor_rollout_ref.model.path")
    if not path:
        return [Check("model", False, "actor_rollout_ref.model.path is not set")]
    problems = training_model_problems(str(path))
    return [Check("model", False, p) for p in problems] or [Check("model", True, f"{path}: weights readable")]


def run_checks(config: Any, *, skip_server: bool = False, skip_data: bool = False, skip_model: bool = False,
               info_fn: Callable[[str], dict[str, Any]] | None = None) -> list[Check]:
    checks = check_group_size(config) + check_reward_wiring(config)
    if not skip_model:
        checks += check_model(config)
    if not skip_server:
        checks += check_server(config, info_fn)
    if not skip_data:
        checks += check_data(config)
    return checks


def load_config(config: str, overrides: Sequence[str] = ()) -> Any:
    """Compose ``config`` with Hydra: a recipe name (``qwen3_tts_grpo``) or a Hydra YAML file path."""
    from hydra import compose, initialize_config_dir

    from .recipes import RECIPES_DIR, config_dir

    path = Path(config)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise FileNotFoundError(f"config file {path} does not exist")
        directory, name = path.resolve().parent, path.stem
    else:
        directory, name = config_dir(config), config
        if not (directory / f"{name}.yaml").is_file():
            raise ValueError(f"{config!r} is neither a YAML file nor a recipe under {RECIPES_DIR}")
    with initialize_config_dir(config_dir=str(directory), version_base=None):
        return compose(config_name=name, overrides=list(overrides))
