"""The launch of each recipe, in one place: environment, entry point and Hydra overrides.

Both recipes run verl-omni's own entry point, ``python -m
verl_omni.trainer.main_omni``, with the recipe expressed as command-line
overrides on its standard ``omni_trainer`` config (``omni_trainer.yaml`` sets
``hydra.searchpath``, so it must stay the primary config: no recipe YAML, no
``--config-path``).  ``run.sh``, ``audio-reward preflight`` and the tests all
read :func:`plan`, so what is checked is what launches.

    python -m audio_reward.trainer_plugin.recipes.launch qwen3_tts_grpo [OVERRIDES...]

prints the plan as ``run.sh`` consumes it: one ``NAME=value`` line per
environment variable to export, a line ``--``, then the trainer command one
shell word per line (``-m``, ``verl_omni.trainer.main_omni``, each override).
The user's overrides come last, so they win.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ENTRY_POINT = ("-m", "verl_omni.trainer.main_omni")
EXTERNAL_MODULES = ("verl_omni", "audio_reward.trainer_plugin.verl_plugin")
"""Imported by ``import verl`` in every Ray worker: verl-omni has no ``verl.plugins`` entry point, and ours
is listed too so the reward manager and ``grpo_masked`` register even where the entry point is absent."""

FAIL_CLOSED_SAMPLER = "pkg://audio_reward.trainer_plugin.fail_closed"


@dataclass(frozen=True)
class Sampling:
    """How a rollout samples codec-0 (verl's ``rollout.temperature/top_p/top_k``; ``top_k=-1`` is off)."""

    temperature: float
    top_p: float
    top_k: int


TTS_SAMPLING = Sampling(temperature=1.0, top_p=1.0, top_k=-1)
"""The TTS recipe's rollout and validation sampling; the checkpoint evaluation decodes with the same values."""
TTS_MAX_FRAMES = 360
"""``data.max_response_length`` of the TTS recipe: codec-0 runs at 12.5 Hz, so 360 frames is about 29 s of speech."""


class LaunchError(ValueError):
    """A recipe cannot be launched as configured (missing variable, missing file, bad value)."""


@dataclass(frozen=True)
class Variable:
    """One environment variable a recipe reads."""

    name: str
    help: str
    default: str | None = None
    path: bool = False
    """The value names a file or folder that must exist."""


@dataclass(frozen=True)
class Recipe:
    name: str
    summary: str
    variables: tuple[Variable, ...]
    overrides: Callable[[Mapping[str, str]], list[str]]


@dataclass(frozen=True)
class LaunchPlan:
    """What ``run.sh`` exports and runs."""

    recipe: str
    env: dict[str, str]
    overrides: list[str]
    output_dir: str
    settings: dict[str, str] = field(default_factory=dict)
    """The resolved recipe variables (defaults filled in)."""

    @property
    def command(self) -> list[str]:
        """The trainer command after the Python interpreter."""
        return [*ENTRY_POINT, *self.overrides]

    def lines(self) -> list[str]:
        """The dry-run listing: ``NAME=value`` lines, ``--``, one command word per line."""
        return [*(f"{k}={v}" for k, v in self.env.items()), "--", *self.command]


def _external_modules(environ: Mapping[str, str]) -> str:
    present = [m.strip() for m in environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m.strip()]
    return ",".join([*present, *(m for m in EXTERNAL_MODULES if m not in present)])


def _fail_closed(v: Mapping[str, str], output_dir: str) -> list[str]:
    """verl's v1 replay buffer keeps training when a group fails; this custom sampler stops the run instead."""
    return [
        f"trainer.v1.sampler.custom_sampler.path={FAIL_CLOSED_SAMPLER}",
        "trainer.v1.sampler.custom_sampler.name=FailClosedReplayBuffer",
        f"+trainer.v1.sampler.sampler_kwargs.max_failed_groups={v['MAX_FAILED_GROUPS']}",
        f"+trainer.v1.sampler.sampler_kwargs.failure_log={output_dir}/reward_failures.jsonl",
    ]


def _tts_overrides(v: Mapping[str, str]) -> list[str]:
    # Values follow verl-omni's Qwen3-TTS GRPO example (examples/grpo_trainer/qwen3_tts/run_qwen3_tts_grpo.sh):
    # real rollout weights on both stages, TP 1, eager attention, fp32 parameters with bf16 compute.
    out, seed, gpus = v["OUTPUT_DIR"], v["SEED"], v["NUM_GPUS"]
    overrides = [
        f"data.train_files={v['TRAIN_FILE']}",
        f"data.val_files={v['VAL_FILE']}",
        f"data.seed={seed}",
        "data.train_batch_size=4",
        "data.dataloader_num_workers=0",
        "data.max_prompt_length=512",
        f"data.max_response_length={TTS_MAX_FRAMES}",
        "data.val_max_samples=100",
        "data.validation_shuffle=false",
        "data.filter_overlong_prompts=true",
        "data.truncation=error",
        f"actor_rollout_ref.model.path={v['MODEL_PATH']}",
        # the talker's codec-0 head is the policy; the code predictor and code2wav stay frozen
        "actor_rollout_ref.model.model_stage=talker",
        "actor_rollout_ref.model.hf_config_name=talker_config",
        "actor_rollout_ref.model.trust_remote_code=false",
        "actor_rollout_ref.model.use_remove_padding=false",
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "+actor_rollout_ref.model.override_config.attn_implementation=eager",
        f"+actor_rollout_ref.model.override_config.tts_language={v['TTS_LANGUAGE']}",
        f"+actor_rollout_ref.model.override_config.tts_spk_embed_path={v['SPK_EMBED_PATH']}",
        "actor_rollout_ref.actor.strategy=fsdp",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.actor.use_dynamic_bsz=false",
        "actor_rollout_ref.actor.use_kl_loss=true",
        "actor_rollout_ref.actor.kl_loss_coef=0.12",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.actor.ppo_epochs=1",
        "actor_rollout_ref.actor.shuffle=false",
        "actor_rollout_ref.actor.clip_ratio_low=0.2",
        "actor_rollout_ref.actor.clip_ratio_high=0.2",
        "actor_rollout_ref.actor.entropy_coeff=0.0",
        "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
        "actor_rollout_ref.actor.use_torch_compile=false",
        "actor_rollout_ref.actor.policy_loss.loss_mode=vanilla",
        "actor_rollout_ref.actor.optim.lr=1.0e-6",
        "actor_rollout_ref.actor.optim.lr_warmup_steps=10",
        "actor_rollout_ref.actor.optim.lr_scheduler_type=constant",
        "actor_rollout_ref.actor.optim.weight_decay=0.0",
        "actor_rollout_ref.actor.optim.clip_grad=1.0",
        f"actor_rollout_ref.actor.data_loader_seed={seed}",
        f"actor_rollout_ref.actor.fsdp_config.fsdp_size={gpus}",
        f"actor_rollout_ref.actor.fsdp_config.seed={seed}",
        "actor_rollout_ref.actor.fsdp_config.model_dtype=float32",
        "actor_rollout_ref.actor.fsdp_config.dtype=bfloat16",
        "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:bf16,reduce_dtype:fp32,buffer_dtype:fp32}",
        "actor_rollout_ref.actor.fsdp_config.param_offload=false",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=false",
        "actor_rollout_ref.actor.fsdp_config.use_orig_params=true",
        "actor_rollout_ref.actor.fsdp_config.use_torch_compile=false",
        "actor_rollout_ref.actor.fsdp_config.wrap_policy.min_num_params=0",
        "actor_rollout_ref.rollout.name=vllm_omni",
        "actor_rollout_ref.rollout.mode=async",
        # GRPO group size: the advantage compares the n samples of one prompt
        "actor_rollout_ref.rollout.n=8",
        f"actor_rollout_ref.rollout.temperature={TTS_SAMPLING.temperature}",
        f"actor_rollout_ref.rollout.top_p={TTS_SAMPLING.top_p}",
        f"actor_rollout_ref.rollout.top_k={TTS_SAMPLING.top_k}",
        "actor_rollout_ref.rollout.dtype=bfloat16",
        # verl-omni syncs trained weights to stage 0 only; code2wav must load real weights and run unsharded
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.load_format=safetensors",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.20",
        "actor_rollout_ref.rollout.max_num_seqs=8",
        "actor_rollout_ref.rollout.max_num_batched_tokens=1024",
        "actor_rollout_ref.rollout.free_cache_engine=false",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
        "actor_rollout_ref.rollout.logprobs_mode=processed_logprobs",
        "actor_rollout_ref.rollout.layered_summon=true",
        "actor_rollout_ref.rollout.enable_prefix_caching=false",
        "actor_rollout_ref.rollout.enforce_eager=true",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.agent.num_workers=8",
        "actor_rollout_ref.rollout.agent.default_agent_loop=omni_single_turn_agent",
        f"+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.seed={seed}",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.output_mode=ar",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.pipeline_name=qwen3_tts_rl",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.pipeline_mode=full",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.async_chunk=false",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.attention_config.backend=TRITON_ATTN",
        "actor_rollout_ref.rollout.val_kwargs.n=1",
        "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
        f"actor_rollout_ref.rollout.val_kwargs.temperature={TTS_SAMPLING.temperature}",
        f"actor_rollout_ref.rollout.val_kwargs.top_p={TTS_SAMPLING.top_p}",
        f"actor_rollout_ref.rollout.val_kwargs.top_k={TTS_SAMPLING.top_k}",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.ref.strategy=fsdp",
        f"actor_rollout_ref.ref.fsdp_config.fsdp_size={gpus}",
        f"actor_rollout_ref.ref.fsdp_config.seed={seed}",
        "actor_rollout_ref.ref.fsdp_config.model_dtype=float32",
        "actor_rollout_ref.ref.fsdp_config.dtype=bfloat16",
        "+actor_rollout_ref.ref.fsdp_config.mixed_precision={param_dtype:bf16,reduce_dtype:fp32,buffer_dtype:fp32}",
        "actor_rollout_ref.ref.fsdp_config.param_offload=false",
        "actor_rollout_ref.ref.fsdp_config.use_orig_params=true",
        "actor_rollout_ref.ref.fsdp_config.wrap_policy.min_num_params=0",
        "algorithm.adv_estimator=grpo",
        "algorithm.norm_adv_by_std_in_grpo=true",
        "algorithm.use_kl_in_reward=false",
        # way (a): our reward manager, loaded by path so no registry or entry point is needed
        "reward.num_workers=1",
        "reward.reward_manager.source=importlib",
        "reward.reward_manager.module.path=pkg://audio_reward.trainer_plugin.reward_manager",
        "reward.reward_manager.name=AudioScoreRewardManager",
        f"+reward.audio_reward.server_url={v['AUDIO_REWARD_URL']}",
        "+reward.audio_reward.failure_policy=raise",
        f"+reward.audio_reward.language={v['SCORER_LANGUAGE']}",
        "+reward.audio_reward.reward.formula=1-cer",
        f"+reward.audio_reward.validation_dir={out}/validation_audio",
        f"+reward.audio_reward.failure_log={out}/reward_failures.jsonl",
        *_fail_closed(v, out),
        "trainer.val_before_train=true",
        "trainer.balance_batch=true",
        "trainer.critic_warmup=0",
        'trainer.logger=["console"]',
        "trainer.project_name=qwen3_tts_grpo",
        "trainer.experiment_name=qwen3_tts_0_6b_audio_reward",
        f"trainer.n_gpus_per_node={gpus}",
        "trainer.nnodes=1",
        "trainer.total_epochs=100",
        "trainer.log_val_generations=100",
        f"trainer.total_training_steps={v['TOTAL_TRAINING_STEPS']}",
        f"trainer.test_freq={v['TEST_FREQ']}",
        f"trainer.save_freq={v['SAVE_FREQ']}",
        f"trainer.resume_mode={v['RESUME_MODE']}",
        f"trainer.default_local_dir={out}/checkpoints",
        f"trainer.validation_data_dir={out}/validation",
        f"trainer.rollout_data_dir={out}/rollout",
    ]
    if v.get("SPK_REF_WAV"):
        overrides.append(f"+reward.audio_reward.reference_audio={v['SPK_REF_WAV']}")
    return overrides


THINKER_LORA_EXCLUDE = ".*talker.*|.*code2wav.*|.*code_predictor.*|.*visual.*|.*audio_tower.*"
"""Everything but the thinker's language model: the speech stack and both encoders stay frozen."""
THINKER_LORA_TARGETS = "['q_proj','k_proj','v_proj','o_proj']"
THINKER_MAX_PROMPT = 4096
THINKER_PROMPT_HEADROOM = 64
"""``rollout.prompt_length`` is ``data.max_prompt_length`` plus this, as in verl-omni's AVQA example (4160)."""
THINKER_MAX_RESPONSE = 2048
"""``data.max_response_length``: the answer tokens a rollout may write; the thinker evaluation's cap too."""


def _thinker_overrides(v: Mapping[str, str]) -> list[str]:
    # Values follow verl-omni's Qwen3-Omni thinker examples (examples/gspo_trainer/qwen3_omni/
    # run_qwen3_omni_thinker_gspo_lora_v1.sh and ..._npu_avqa_v1.sh), with GRPO instead of GSPO.
    out, gpus, tp = v["OUTPUT_DIR"], v["NUM_GPUS"], v["ROLLOUT_TP"]
    return [
        f"data.train_files={v['TRAIN_FILE']}",
        f"data.val_files={v['VAL_FILE']}",
        "data.train_batch_size=32",
        f"data.max_prompt_length={THINKER_MAX_PROMPT}",
        f"data.max_response_length={THINKER_MAX_RESPONSE}",
        "data.filter_overlong_prompts=true",
        # the filter tokenizes every row with its audio; one worker makes a large AVQA set slow to start
        "data.filter_overlong_prompts_workers=64",
        "data.truncation=error",
        "data.validation_shuffle=false",
        # verl-omni's dataset for omni audio inputs: Qwen's process_mm_info reads the `audios` column
        "data.custom_cls.path=pkg://verl_omni.utils.dataset.omni_rl_datasets",
        "data.custom_cls.name=QwenOmniRLHFDataset",
        "++data.mm_processor_kwargs.sampling_rate=16000",
        f"actor_rollout_ref.model.path={v['MODEL_PATH']}",
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "actor_rollout_ref.model.use_remove_padding=true",
        "actor_rollout_ref.model.lora_rank=32",
        "actor_rollout_ref.model.lora_alpha=64",
        "actor_rollout_ref.model.lora_dtype=float32",
        "actor_rollout_ref.model.lora.merge=true",
        f"actor_rollout_ref.model.exclude_modules={THINKER_LORA_EXCLUDE}",
        f"actor_rollout_ref.model.target_modules={THINKER_LORA_TARGETS}",
        "actor_rollout_ref.actor.freeze_vision_tower=true",
        "actor_rollout_ref.actor.strategy=fsdp2",
        "actor_rollout_ref.actor.optim.lr=3e-6",
        "actor_rollout_ref.actor.optim.weight_decay=0.01",
        "actor_rollout_ref.actor.optim.clip_grad=1.0",
        "actor_rollout_ref.actor.ppo_mini_batch_size=16",
        "actor_rollout_ref.actor.use_dynamic_bsz=true",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=20480",
        "actor_rollout_ref.actor.use_kl_loss=true",
        "actor_rollout_ref.actor.kl_loss_coef=0.01",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        "actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16",
        "actor_rollout_ref.actor.fsdp_config.param_offload=true",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
        "actor_rollout_ref.rollout.name=vllm_omni",
        "actor_rollout_ref.rollout.mode=async",
        # The dataset's length filter and the agent loop tokenize the prompt separately (the loop applies the
        # chat template and expands the audio placeholder itself), so a prompt the filter let through can come
        # out a few tokens longer. verl 0.9.1 never truncates a multimodal prompt over rollout.prompt_length: it
        # raises (agent_loop.py, "Multimodal prompt produced ... tokens"), and with the fail-closed sampler one
        # such prompt stops the run. Headroom over data.max_prompt_length keeps those prompts.
        f"actor_rollout_ref.rollout.prompt_length={THINKER_MAX_PROMPT + THINKER_PROMPT_HEADROOM}",
        "actor_rollout_ref.rollout.n=8",
        "actor_rollout_ref.rollout.temperature=1.0",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp}",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        "actor_rollout_ref.rollout.load_format=safetensors",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=20480",
        "actor_rollout_ref.rollout.enable_prefix_caching=false",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.output_mode=ar",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.pipeline_name=qwen3_omni_moe",
        "actor_rollout_ref.rollout.val_kwargs.n=1",
        "actor_rollout_ref.rollout.val_kwargs.do_sample=false",
        "actor_rollout_ref.rollout.val_kwargs.temperature=0",
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=true",
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=20480",
        "actor_rollout_ref.ref.fsdp_config.param_offload=true",
        "actor_rollout_ref.ref.fsdp_config.model_dtype=bfloat16",
        "algorithm.adv_estimator=grpo",
        "algorithm.norm_adv_by_std_in_grpo=true",
        "algorithm.use_kl_in_reward=false",
        "reward.num_workers=4",
        "reward.reward_manager.source=register",
        "reward.reward_manager.name=naive",
        "reward.custom_reward_function.path=pkg://audio_reward.trainer_plugin.mcq",
        "reward.custom_reward_function.name=compute_score",
        # format_ok is always reported; this weight makes it part of the reward (0 = accuracy only)
        "+reward.custom_reward_function.reward_kwargs.format_weight=0.0",
        *_fail_closed(v, out),
        "trainer.val_before_train=true",
        "trainer.critic_warmup=0",
        'trainer.logger=["console"]',
        "trainer.project_name=omni_thinker_grpo",
        "trainer.experiment_name=qwen3_omni_30b_a3b_avqa",
        f"trainer.n_gpus_per_node={gpus}",
        "trainer.nnodes=1",
        "trainer.total_epochs=3",
        "trainer.test_freq=20",
        "trainer.save_freq=50",
        "trainer.log_val_generations=8",
        f"trainer.default_local_dir={out}/checkpoints",
        f"trainer.validation_data_dir={out}/validation",
    ]


_COMMON_TAIL = (
    Variable("OUTPUT_DIR", "checkpoints, validation artifacts and logs", default=""),
    Variable("MAX_FAILED_GROUPS", "failed GRPO groups tolerated before the run stops (0: stop at the first)",
             default="0"),
)

RECIPES: dict[str, Recipe] = {
    "qwen3_tts_grpo": Recipe(
        "qwen3_tts_grpo",
        "GRPO on Qwen3-TTS-12Hz-0.6B-Base codec-0, rewarded by the audio-reward scorer",
        (
            Variable("MODEL_PATH", "local Qwen3-TTS-12Hz-0.6B-Base folder", path=True),
            Variable("TRAIN_FILE", "train parquet (prepare_data.py)", path=True),
            Variable("VAL_FILE", "validation parquet", path=True),
            Variable("SPK_EMBED_PATH", "speaker embedding JSON (audio-reward tts-speaker)", path=True),
            Variable("AUDIO_REWARD_URL", "scorer base URL, e.g. http://scorer:8000"),
            Variable("SPK_REF_WAV", "the reference recording the speaker embedding came from (copied into "
                     "each validation step)", default="", path=True),
            Variable("TTS_LANGUAGE", "language tag of the rollout prompt (verl-omni's qwen3_tts_rl accepts Auto)",
                     default="Auto"),
            Variable("SCORER_LANGUAGE", "language the scorer transcribes in", default="en"),
            Variable("NUM_GPUS", "GPUs on the node", default="2"),
            Variable("SEED", "data, FSDP and rollout seed", default="42"),
            Variable("TOTAL_TRAINING_STEPS", "updates", default="500"),
            Variable("TEST_FREQ", "validate every N updates", default="20"),
            Variable("SAVE_FREQ", "checkpoint every N updates", default="20"),
            Variable("RESUME_MODE", "verl trainer.resume_mode", default="auto"),
            *_COMMON_TAIL,
        ),
        _tts_overrides,
    ),
    "omni_thinker_grpo": Recipe(
        "omni_thinker_grpo",
        "GRPO with LoRA on the Qwen3-Omni thinker for audio multiple-choice QA",
        (
            Variable("MODEL_PATH", "local Qwen3-Omni-30B-A3B-Instruct folder", path=True),
            Variable("TRAIN_FILE", "train parquet (prepare_data.py)", path=True),
            Variable("VAL_FILE", "validation parquet", path=True),
            Variable("NUM_GPUS", "GPUs on the node", default="8"),
            Variable("ROLLOUT_TP", "vLLM-Omni tensor parallel size", default="2"),
            *_COMMON_TAIL,
        ),
        _thinker_overrides,
    ),
}


def recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise LaunchError(f"unknown recipe {name!r}; known: {sorted(RECIPES)}") from None


def resolve(name: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The recipe's variables from ``environ`` with defaults; :class:`LaunchError` names each one missing."""
    environ = os.environ if environ is None else environ
    spec = recipe(name)
    values: dict[str, str] = {}
    problems: list[str] = []
    for var in spec.variables:
        value = environ.get(var.name) or (var.default if var.default is not None else "")
        if var.name == "OUTPUT_DIR" and not value:
            value = f"outputs/{name}"
        if not value and var.default is None:
            problems.append(f"set {var.name} ({var.help})")
        elif var.path and value and not Path(value).expanduser().exists():
            problems.append(f"{var.name}={value} does not exist ({var.help})")
        elif "\n" in value:
            problems.append(f"{var.name} must be one line")
        values[var.name] = value
    if problems:
        raise LaunchError(f"{name}: " + "; ".join(problems))
    return values


def plan(name: str, overrides: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> LaunchPlan:
    """The launch of recipe ``name``: its environment and the trainer overrides, ``overrides`` appended."""
    environ = os.environ if environ is None else environ
    spec = recipe(name)
    values = resolve(name, environ)
    bad = [o for o in overrides if "\n" in o]
    if bad:
        raise LaunchError(f"an override must be one line, got {bad[0]!r}")
    env = {
        "VERL_USE_EXTERNAL_MODULES": _external_modules(environ),
        "TOKENIZERS_PARALLELISM": "false",
        "VLLM_USE_FLASHINFER_SAMPLER": "0",
    }
    if "SEED" in values:
        env["PYTHONHASHSEED"] = values["SEED"]
    env["OUTPUT_DIR"] = values["OUTPUT_DIR"]
    return LaunchPlan(recipe=name, env=env, overrides=[*spec.overrides(values), *overrides],
                      output_dir=values["OUTPUT_DIR"], settings=values)


def _last(overrides: Sequence[str], key: str, default: str) -> str:
    value = default
    for override in overrides:
        name, _, rest = override.lstrip("+").partition("=")
        if name == key:
            value = rest
    return value


def check_run(launch: LaunchPlan) -> list[str]:
    """Problems of a finished run that the trainer does not report: validation steps that wrote no audio."""
    audio_dir = _last(launch.overrides, "reward.audio_reward.validation_dir", "")
    if not audio_dir:
        return []
    validated = (_last(launch.overrides, "trainer.val_before_train", "true").lower() == "true"
                 or int(_last(launch.overrides, "trainer.test_freq", "-1")) > 0)
    if not validated:
        return []
    from ..validation_log import ValidationLogger

    return ValidationLogger(audio_dir).problems()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    check = bool(argv) and argv[0] == "--check-run"
    if check:
        argv = argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        for spec in RECIPES.values():
            print(f"{spec.name}: {spec.summary}")
            for var in spec.variables:
                if var.default is None:
                    default = ""
                elif var.name == "OUTPUT_DIR":
                    default = f" (default outputs/{spec.name})"
                else:
                    default = f" (default {var.default})" if var.default else " (optional)"
                print(f"  {var.name}: {var.help}{default}")
        return 0 if argv else 2
    try:
        launch = plan(argv[0], argv[1:])
    except LaunchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if check:
        problems = check_run(launch)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1 if problems else 0
    sys.stdout.write("\n".join(launch.lines()) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
