"""The recipes' trainer overrides as data: one typed table per recipe.

Each :class:`Override` is one Hydra override of verl-omni's ``omni_trainer``
config, ``[+|++]key=value``, with the reason for its value where it is not
verl-omni's example's.  A value is a :class:`string.Template`: ``${NAME}``
is the recipe variable ``NAME`` (:mod:`.launch` lists them and their
defaults).  :mod:`.launch` renders a table into the trainer's command line
and ``audio-reward preflight`` (:mod:`..preflight`) reads the keys named here
and the values the tables give them, so the check and the launch cannot drift
apart.  Nothing here imports verl.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from string import Template
from types import MappingProxyType
from typing import Literal

# verl keys that the pre-flight reads as well as the launch writes
MODEL_PATH = "actor_rollout_ref.model.path"
OVERRIDE_CONFIG = "actor_rollout_ref.model.override_config"
TTS_LANGUAGE = f"{OVERRIDE_CONFIG}.tts_language"
SPEAKER_EMBEDDING = f"{OVERRIDE_CONFIG}.tts_spk_embed_path"
LORA_RANK = "actor_rollout_ref.model.lora_rank"
LORA_EXCLUDE = "actor_rollout_ref.model.exclude_modules"
LORA_TARGETS = "actor_rollout_ref.model.target_modules"
ROLLOUT = "actor_rollout_ref.rollout"
ROLLOUT_NAME = f"{ROLLOUT}.name"
GROUP_SIZE = f"{ROLLOUT}.n"
ROLLOUT_TP = f"{ROLLOUT}.tensor_model_parallel_size"
LOAD_FORMAT = f"{ROLLOUT}.load_format"
PIPELINE_NAME = f"{ROLLOUT}.engine_kwargs.vllm_omni.pipeline_name"
AGENT_LOOP = f"{ROLLOUT}.agent.default_agent_loop"
PIPELINE_MODE = f"{ROLLOUT}.engine_kwargs.vllm_omni.pipeline_mode"
ADV_ESTIMATOR = "algorithm.adv_estimator"
MANAGER_NAME = "reward.reward_manager.name"
MANAGER_PATH = "reward.reward_manager.module.path"
REWARD_FN_PATH = "reward.custom_reward_function.path"
REWARD_FN_NAME = "reward.custom_reward_function.name"
VALIDATION_AUDIO_DIR = "reward.audio_reward.validation_dir"
SAMPLER_PATH = "trainer.v1.sampler.custom_sampler.path"
SAMPLER_NAME = "trainer.v1.sampler.custom_sampler.name"
MAX_FAILED_GROUPS = "trainer.v1.sampler.sampler_kwargs.max_failed_groups"
VAL_BEFORE_TRAIN = "trainer.val_before_train"
TEST_FREQ = "trainer.test_freq"
ROLLOUT_CORRECTION = "algorithm.rollout_correction"
CALCULATE_LOG_PROBS = f"{ROLLOUT}.calculate_log_probs"
TRAIN_FILES = "data.train_files"
VAL_FILES = "data.val_files"


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
FSDP_MIXED_PRECISION = "{param_dtype:bf16,reduce_dtype:fp32,buffer_dtype:fp32}"
"""The TTS recipe's FSDP mixed precision for actor and reference: fp32 parameters, bf16 compute."""
THINKER_LORA_EXCLUDE = ".*talker.*|.*code2wav.*|.*code_predictor.*|.*visual.*|.*audio_tower.*"
"""Everything but the thinker's language model: the speech stack and both encoders stay frozen."""
THINKER_MAX_PROMPT = 4096
THINKER_PROMPT_HEADROOM = 64
"""``rollout.prompt_length`` is ``data.max_prompt_length`` plus this, as in verl-omni's AVQA example (4160)."""
THINKER_MAX_RESPONSE = 12288
"""``data.max_response_length``: the answer tokens a rollout may write; the thinker evaluation's cap too.

verl-omni's AVQA example's value: the prompt asks for ``<think>`` reasoning, and an answer cut off inside
it scores 0. A prompt and a whole answer (4160 + 12288) fit one ``ppo_max_token_len_per_gpu`` of 20480."""
LORA = "lora"
"""``BACKBONE``'s default: anything but ``full`` trains the LoRA adapters."""
FULL = "full"
BACKBONES = (LORA, FULL)
"""The thinker recipe's ``BACKBONE``: LoRA on the attention projections, or every weight of the thinker."""


@dataclass(frozen=True)
class Override:
    """One override: ``key`` set to ``value`` (a template over the recipe variables)."""

    key: str
    value: str
    why: str = ""
    add: Literal["", "+", "++"] = ""
    """Hydra's prefix: ``+`` adds a key the config lacks, ``++`` adds it or replaces it."""
    when: str = ""
    """A recipe variable: the override is given only if it is not empty; ``NAME=value`` / ``NAME!=value``: only if
    it is / is not ``value`` (unset reads as empty)."""

    def applies(self, values: Mapping[str, str]) -> bool:
        """Whether the row is given: no ``when``, a variable ``when`` names is set, ``NAME=v`` or ``NAME!=v`` holds."""
        name, equals, wanted = self.when.partition("=")
        if not equals:
            return not name or bool(values.get(name))
        if name.endswith("!"):
            return values.get(name[:-1], "") != wanted
        return values.get(name, "") == wanted

    def render(self, values: Mapping[str, str]) -> str | None:
        """``[+]key=value`` with the variables filled in; None when the row does not apply (:meth:`applies`)."""
        return f"{self.add}{self.key}={Template(self.value).substitute(values)}" if self.applies(values) else None


_PREFIXES: Mapping[str, Literal["", "+", "++"]] = MappingProxyType({"": "", "+": "+", "++": "++"})


def ov(spelled: str, value: object, why: str = "", *, when: str = "") -> Override:
    """A row as Hydra spells it: a leading ``+`` or ``++`` on ``spelled`` is the prefix."""
    key = spelled.lstrip("+")
    return Override(key, str(value), why, _PREFIXES[spelled[: len(spelled) - len(key)]], when)


@dataclass(frozen=True)
class OverrideTable:
    """A recipe's overrides, in command-line order."""

    rows: tuple[Override, ...]

    def render(self, values: Mapping[str, str]) -> list[str]:
        """The ``key=value`` command-line words, the recipe variables ``values`` filled in."""
        return [word for row in self.rows if (word := row.render(values)) is not None]

    def value(self, key: str) -> str:
        """The value the table's last row for ``key`` gives it (a template where it reads a variable; a row with
        ``when`` counts whatever the variables); KeyError if it sets none."""
        for row in reversed(self.rows):
            if row.key == key:
                return row.value
        raise KeyError(f"the recipe sets no {key}")


FAIL_CLOSED_MODULE = "audio_reward.trainer_plugin.fail_closed"
FAIL_CLOSED = (
    ov(SAMPLER_PATH, f"pkg://{FAIL_CLOSED_MODULE}",
       "verl's v1 replay buffer keeps training when a group fails; this custom sampler stops the run instead"),
    ov(SAMPLER_NAME, "FailClosedReplayBuffer"),
    ov(f"+{MAX_FAILED_GROUPS}", "${MAX_FAILED_GROUPS}"),
    ov("+trainer.v1.sampler.sampler_kwargs.failure_log", "${OUTPUT_DIR}/reward_failures.jsonl"),
)

# Values follow verl-omni's Qwen3-TTS GRPO example (examples/grpo_trainer/qwen3_tts/run_qwen3_tts_grpo.sh, main
# after #428, omni_source.TTS_COMMIT) line for line: real rollout weights on both stages, TP 1, eager attention,
# fp32 parameters with bf16 compute. Where they differ it is the reward (our manager, not its HTTP client), the
# file logger, and tts_language as a variable that pre-flight holds to Auto.
TTS_OVERRIDES = OverrideTable((
    ov(TRAIN_FILES, "${TRAIN_FILE}"),
    ov(VAL_FILES, "${VAL_FILE}"),
    ov("data.seed", "${SEED}"),
    ov("data.train_batch_size", "4"),
    ov("data.dataloader_num_workers", "0"),
    ov("data.max_prompt_length", "512"),
    ov("data.max_response_length", TTS_MAX_FRAMES),
    ov("data.val_max_samples", "100"),
    ov("data.validation_shuffle", "false"),
    ov("data.filter_overlong_prompts", "true"),
    ov("data.truncation", "error"),
    ov(MODEL_PATH, "${MODEL_PATH}"),
    ov("actor_rollout_ref.model.model_stage", "talker",
       "the talker's codec-0 head is the policy; the code predictor and code2wav stay frozen"),
    ov("actor_rollout_ref.model.hf_config_name", "talker_config"),
    ov("actor_rollout_ref.model.trust_remote_code", "false"),
    ov("actor_rollout_ref.model.use_remove_padding", "false"),
    ov("actor_rollout_ref.model.enable_gradient_checkpointing", "true"),
    ov("+actor_rollout_ref.model.override_config.attn_implementation", "eager"),
    ov(f"+{TTS_LANGUAGE}", "${TTS_LANGUAGE}"),
    ov(f"+{SPEAKER_EMBEDDING}", "${SPK_EMBED_PATH}"),
    ov("actor_rollout_ref.actor.strategy", "fsdp"),
    ov("actor_rollout_ref.actor.ppo_mini_batch_size", "4"),
    ov("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "1"),
    ov("actor_rollout_ref.actor.use_dynamic_bsz", "false"),
    ov("actor_rollout_ref.actor.use_kl_loss", "true"),
    ov("actor_rollout_ref.actor.kl_loss_coef", "0.12"),
    ov("actor_rollout_ref.actor.kl_loss_type", "low_var_kl"),
    ov("actor_rollout_ref.actor.ppo_epochs", "1"),
    ov("actor_rollout_ref.actor.shuffle", "false"),
    ov("actor_rollout_ref.actor.clip_ratio_low", "0.2"),
    ov("actor_rollout_ref.actor.clip_ratio_high", "0.2"),
    ov("actor_rollout_ref.actor.entropy_coeff", "0.0"),
    ov("actor_rollout_ref.actor.loss_agg_mode", "seq-mean-token-mean"),
    ov("actor_rollout_ref.actor.use_torch_compile", "false"),
    ov("actor_rollout_ref.actor.policy_loss.loss_mode", "vanilla"),
    ov("actor_rollout_ref.actor.optim.lr", "1.0e-6"),
    ov("actor_rollout_ref.actor.optim.lr_warmup_steps", "10"),
    ov("actor_rollout_ref.actor.optim.lr_scheduler_type", "constant"),
    ov("actor_rollout_ref.actor.optim.weight_decay", "0.0"),
    ov("actor_rollout_ref.actor.optim.clip_grad", "1.0"),
    ov("actor_rollout_ref.actor.data_loader_seed", "${SEED}"),
    ov("actor_rollout_ref.actor.fsdp_config.fsdp_size", "${NUM_GPUS}"),
    ov("actor_rollout_ref.actor.fsdp_config.seed", "${SEED}"),
    ov("actor_rollout_ref.actor.fsdp_config.model_dtype", "float32"),
    ov("actor_rollout_ref.actor.fsdp_config.dtype", "bfloat16"),
    ov("+actor_rollout_ref.actor.fsdp_config.mixed_precision", FSDP_MIXED_PRECISION),
    ov("actor_rollout_ref.actor.fsdp_config.param_offload", "false"),
    ov("actor_rollout_ref.actor.fsdp_config.optimizer_offload", "false"),
    ov("actor_rollout_ref.actor.fsdp_config.use_orig_params", "true"),
    ov("actor_rollout_ref.actor.fsdp_config.use_torch_compile", "false"),
    ov("actor_rollout_ref.actor.fsdp_config.wrap_policy.min_num_params", "0"),
    ov(ROLLOUT_NAME, "vllm_omni"),
    ov("actor_rollout_ref.rollout.mode", "async"),
    ov(GROUP_SIZE, 8, "GRPO group size: the advantage compares the n samples of one prompt"),
    *(ov(f"{ROLLOUT}.{name}", value) for name, value in asdict(TTS_SAMPLING).items()),
    ov("actor_rollout_ref.rollout.dtype", "bfloat16"),
    ov(ROLLOUT_TP, 1, "verl-omni syncs trained weights to stage 0 only; code2wav must load real weights and run "
       "unsharded"),
    ov(LOAD_FORMAT, "safetensors", "the frozen code2wav stage must load real weights"),
    ov("actor_rollout_ref.rollout.gpu_memory_utilization", "0.20"),
    ov("actor_rollout_ref.rollout.max_num_seqs", "8"),
    ov("actor_rollout_ref.rollout.max_num_batched_tokens", "1024"),
    ov("actor_rollout_ref.rollout.free_cache_engine", "false"),
    ov("actor_rollout_ref.rollout.calculate_log_probs", "true"),
    ov("actor_rollout_ref.rollout.logprobs_mode", "processed_logprobs"),
    ov("actor_rollout_ref.rollout.layered_summon", "true"),
    ov("actor_rollout_ref.rollout.enable_prefix_caching", "false"),
    ov("actor_rollout_ref.rollout.enforce_eager", "true"),
    ov("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "1"),
    ov("actor_rollout_ref.rollout.agent.num_workers", "8"),
    ov(AGENT_LOOP, "omni_single_turn_agent"),
    ov("+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.seed", "${SEED}"),
    ov("+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.output_mode", "ar"),
    ov(f"+{PIPELINE_NAME}", "qwen3_tts_rl"),
    ov(f"+{PIPELINE_MODE}", "full"),
    ov("+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.async_chunk", "false"),
    ov("+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.attention_config.backend", "TRITON_ATTN"),
    ov("actor_rollout_ref.rollout.val_kwargs.n", "1"),
    ov("actor_rollout_ref.rollout.val_kwargs.do_sample", "true"),
    *(ov(f"{ROLLOUT}.val_kwargs.{name}", value) for name, value in asdict(TTS_SAMPLING).items()),
    ov("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "1"),
    ov("actor_rollout_ref.ref.strategy", "fsdp"),
    ov("actor_rollout_ref.ref.fsdp_config.fsdp_size", "${NUM_GPUS}"),
    ov("actor_rollout_ref.ref.fsdp_config.seed", "${SEED}"),
    ov("actor_rollout_ref.ref.fsdp_config.model_dtype", "float32"),
    ov("actor_rollout_ref.ref.fsdp_config.dtype", "bfloat16"),
    ov("+actor_rollout_ref.ref.fsdp_config.mixed_precision", FSDP_MIXED_PRECISION),
    ov("actor_rollout_ref.ref.fsdp_config.param_offload", "false"),
    ov("actor_rollout_ref.ref.fsdp_config.use_orig_params", "true"),
    ov("actor_rollout_ref.ref.fsdp_config.wrap_policy.min_num_params", "0"),
    ov(ADV_ESTIMATOR, "grpo"),
    ov("algorithm.norm_adv_by_std_in_grpo", "true"),
    ov("algorithm.use_kl_in_reward", "false"),
    ov("reward.num_workers", "1"),
    ov("reward.reward_manager.source", "importlib",
       "way (a): our reward manager, loaded by path so no registry or entry point is needed"),
    ov(MANAGER_PATH, "pkg://audio_reward.trainer_plugin.reward_manager"),
    ov(MANAGER_NAME, "AudioScoreRewardManager"),
    ov("+reward.audio_reward.server_url", "${AUDIO_REWARD_URL}"),
    ov("+reward.audio_reward.failure_policy", "raise"),
    ov("+reward.audio_reward.language", "${SCORER_LANGUAGE}"),
    ov("+reward.audio_reward.reward.formula", "1-cer"),
    ov(f"+{VALIDATION_AUDIO_DIR}", "${OUTPUT_DIR}/validation_audio"),
    ov("+reward.audio_reward.failure_log", "${OUTPUT_DIR}/reward_failures.jsonl"),
    *FAIL_CLOSED,
    ov(VAL_BEFORE_TRAIN, "true"),
    ov("trainer.balance_batch", "true"),
    ov("trainer.critic_warmup", "0"),
    ov("trainer.logger", '["console","file"]', "the file logger's JSONL (VERL_FILE_LOGGER_PATH) becomes the run's "
       "reward_curve.json and .png"),
    ov("trainer.project_name", "qwen3_tts_grpo"),
    ov("trainer.experiment_name", "qwen3_tts_0_6b_audio_reward"),
    ov("trainer.n_gpus_per_node", "${NUM_GPUS}"),
    ov("trainer.nnodes", "1"),
    ov("trainer.total_epochs", "100"),
    ov("trainer.log_val_generations", "100"),
    ov("trainer.total_training_steps", "${TOTAL_TRAINING_STEPS}"),
    ov(TEST_FREQ, "${TEST_FREQ}"),
    ov("trainer.save_freq", "${SAVE_FREQ}"),
    ov("trainer.max_actor_ckpt_to_keep", "5", "a checkpoint every 20 of 500 steps holds fp32 weights and AdamW's "
       "two moments (about 7 GB for the 0.6B talker): the 5 newest are kept, older ones deleted as the run saves "
       "(verl-omni's example keeps all 26)"),
    ov("trainer.resume_mode", "${RESUME_MODE}"),
    ov("trainer.default_local_dir", "${OUTPUT_DIR}/checkpoints"),
    ov("trainer.validation_data_dir", "${OUTPUT_DIR}/validation"),
    ov("trainer.rollout_data_dir", "${OUTPUT_DIR}/rollout"),
    ov("+reward.audio_reward.reference_audio", "${SPK_REF_WAV}", when="SPK_REF_WAV"),
))
"""``qwen3_tts_grpo``: GRPO on Qwen3-TTS codec-0, rewarded by the audio-reward scorer (reward manager, way (a))."""

# Values follow verl-omni's Qwen3-Omni thinker examples (examples/gspo_trainer/qwen3_omni/
# run_qwen3_omni_thinker_gspo_lora_v1.sh and ..._npu_avqa_v1.sh), with GRPO instead of GSPO.
THINKER_OVERRIDES = OverrideTable((
    ov(TRAIN_FILES, "${TRAIN_FILE}"),
    ov(VAL_FILES, "${VAL_FILE}"),
    ov("data.train_batch_size", "32"),
    ov("data.max_prompt_length", THINKER_MAX_PROMPT),
    ov("data.max_response_length", THINKER_MAX_RESPONSE),
    ov("data.filter_overlong_prompts", "true"),
    ov("data.filter_overlong_prompts_workers", 64,
       "the filter tokenizes every row with its audio; one worker makes a large AVQA set slow to start"),
    ov("data.truncation", "error"),
    ov("data.validation_shuffle", "false"),
    ov("data.custom_cls.path", "pkg://verl_omni.utils.dataset.omni_rl_datasets",
       "verl-omni's dataset for omni audio inputs: Qwen's process_mm_info reads the `audios` column"),
    ov("data.custom_cls.name", "QwenOmniRLHFDataset"),
    ov("++data.mm_processor_kwargs.sampling_rate", "16000"),
    ov(MODEL_PATH, "${MODEL_PATH}"),
    ov("actor_rollout_ref.model.enable_gradient_checkpointing", "true"),
    ov("actor_rollout_ref.model.use_remove_padding", "true"),
    ov(LORA_RANK, "32", when=f"BACKBONE!={FULL}"),
    ov(LORA_RANK, "0", "verl trains every weight where lora_rank is 0, as verl-omni's full-parameter AVQA example "
       "(run_qwen3_omni_thinker_gspo_npu_avqa_v1.sh) does", when=f"BACKBONE={FULL}"),
    ov("actor_rollout_ref.model.lora_alpha", "64", when=f"BACKBONE!={FULL}"),
    ov("actor_rollout_ref.model.lora_dtype", "float32", when=f"BACKBONE!={FULL}"),
    ov("actor_rollout_ref.model.lora.merge", "true", when=f"BACKBONE!={FULL}"),
    ov(LORA_EXCLUDE, THINKER_LORA_EXCLUDE),
    ov(LORA_TARGETS, "['q_proj','k_proj','v_proj','o_proj']", when=f"BACKBONE!={FULL}"),
    ov("actor_rollout_ref.actor.freeze_vision_tower", "true"),
    ov("actor_rollout_ref.actor.strategy", "fsdp2"),
    ov("actor_rollout_ref.actor.optim.lr", "3e-6", when=f"BACKBONE!={FULL}"),
    ov("actor_rollout_ref.actor.optim.weight_decay", "0.01", when=f"BACKBONE!={FULL}"),
    ov("actor_rollout_ref.actor.optim.lr", "1e-6", "verl-omni's full-parameter AVQA example's rate: every weight "
       "moves, not a rank-32 update", when=f"BACKBONE={FULL}"),
    ov("actor_rollout_ref.actor.optim.weight_decay", "0.1", when=f"BACKBONE={FULL}"),
    ov("actor_rollout_ref.actor.optim.clip_grad", "1.0"),
    ov("actor_rollout_ref.actor.ppo_mini_batch_size", "16"),
    ov("actor_rollout_ref.actor.use_dynamic_bsz", "true"),
    ov("actor_rollout_ref.actor.ppo_max_token_len_per_gpu", "20480"),
    ov("actor_rollout_ref.actor.use_kl_loss", "true"),
    ov("actor_rollout_ref.actor.kl_loss_coef", "0.01"),
    ov("actor_rollout_ref.actor.kl_loss_type", "low_var_kl"),
    ov("actor_rollout_ref.actor.loss_agg_mode", "token-mean"),
    ov("actor_rollout_ref.actor.fsdp_config.model_dtype", "bfloat16"),
    ov("actor_rollout_ref.actor.fsdp_config.param_offload", "true"),
    ov("actor_rollout_ref.actor.fsdp_config.optimizer_offload", "true"),
    ov(ROLLOUT_NAME, "vllm_omni"),
    ov("actor_rollout_ref.rollout.mode", "async"),
    ov("actor_rollout_ref.rollout.prompt_length", THINKER_MAX_PROMPT + THINKER_PROMPT_HEADROOM,
       "The dataset's length filter and the agent loop tokenize the prompt separately (the loop applies the chat "
       "template and expands the audio placeholder itself), so a prompt the filter let through can come out a few "
       "tokens longer. verl 0.9.1 never truncates a multimodal prompt over rollout.prompt_length: it raises "
       "(agent_loop.py, 'Multimodal prompt produced ... tokens'), and with the fail-closed sampler one such prompt "
       "stops the run. Headroom over data.max_prompt_length keeps those prompts."),
    ov(GROUP_SIZE, "8"),
    ov("actor_rollout_ref.rollout.temperature", "1.0"),
    ov(ROLLOUT_TP, "${ROLLOUT_TP}"),
    ov("actor_rollout_ref.rollout.gpu_memory_utilization", "0.6"),
    ov(LOAD_FORMAT, "safetensors"),
    ov("actor_rollout_ref.rollout.log_prob_use_dynamic_bsz", "true"),
    ov("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu", "20480"),
    ov("actor_rollout_ref.rollout.enable_prefix_caching", "false"),
    ov("+actor_rollout_ref.rollout.engine_kwargs.vllm_omni.output_mode", "ar"),
    ov(f"+{PIPELINE_NAME}", "qwen3_omni_moe"),
    ov(f"{ROLLOUT_CORRECTION}.rollout_is", "token",
       "truncated importance sampling: each token's policy-gradient term is weighted by pi_train/pi_rollout, "
       "clamped at TIS_THRESHOLD, so tokens the vLLM rollout sampled off the trained policy count less",
       when="TIS_THRESHOLD"),
    ov(f"{ROLLOUT_CORRECTION}.rollout_is_threshold", "${TIS_THRESHOLD}", when="TIS_THRESHOLD"),
    ov(CALCULATE_LOG_PROBS, "true", "the rollout's own log-probabilities, for every run: verl logs the train/rollout "
       "mismatch (training/rollout_probs_diff_*) only with them, and the TIS correction reweights by them"),
    ov("actor_rollout_ref.rollout.val_kwargs.n", "1"),
    ov("actor_rollout_ref.rollout.val_kwargs.do_sample", "false"),
    ov("actor_rollout_ref.rollout.val_kwargs.temperature", "0"),
    ov("actor_rollout_ref.ref.log_prob_use_dynamic_bsz", "true"),
    ov("actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", "20480"),
    ov("actor_rollout_ref.ref.fsdp_config.param_offload", "true"),
    ov("actor_rollout_ref.ref.fsdp_config.model_dtype", "bfloat16"),
    ov(ADV_ESTIMATOR, "grpo"),
    ov("algorithm.norm_adv_by_std_in_grpo", "true"),
    ov("algorithm.use_kl_in_reward", "false"),
    ov("reward.num_workers", "4"),
    ov("reward.reward_manager.source", "register"),
    ov(MANAGER_NAME, "naive"),
    ov(REWARD_FN_PATH, "pkg://audio_reward.trainer_plugin.mcq"),
    ov(REWARD_FN_NAME, "compute_score"),
    ov("+reward.custom_reward_function.reward_kwargs.format_weight", 0.0,
       "format_ok is always reported; this weight makes it part of the reward (0 = accuracy only)"),
    *FAIL_CLOSED,
    ov(VAL_BEFORE_TRAIN, "true"),
    ov("trainer.critic_warmup", "0"),
    ov("trainer.logger", '["console","file"]', "the file logger's JSONL (VERL_FILE_LOGGER_PATH) becomes the run's "
       "reward_curve.json and .png"),
    ov("trainer.project_name", "omni_thinker_grpo"),
    ov("trainer.experiment_name", "qwen3_omni_30b_a3b_avqa"),
    ov("trainer.n_gpus_per_node", "${NUM_GPUS}"),
    ov("trainer.nnodes", "1"),
    ov("trainer.total_epochs", "1", "one pass over the training set, as the published thinker run (seed 003) made"),
    ov(TEST_FREQ, "20"),
    ov("trainer.save_freq", "50"),
    ov("trainer.max_actor_ckpt_to_keep", "2", "each checkpoint carries the 30B thinker (and, training the full "
       "backbone, its optimizer state): the newest two are kept, enough to resume and to compare"),
    ov("trainer.log_val_generations", "8"),
    ov("trainer.default_local_dir", "${OUTPUT_DIR}/checkpoints"),
    ov("trainer.validation_data_dir", "${OUTPUT_DIR}/validation"),
))
"""``omni_thinker_grpo``: GRPO on the Qwen3-Omni thinker (LoRA or its full backbone), rewarded by the multiple-choice
function."""
