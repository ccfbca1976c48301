"""CPU mode for verl: train a whole setup through real verl on a machine without an accelerator.

For checking a training setup on a laptop before a GPU run, and for CI.  Select it in the environment of
the process that starts verl (Ray's workers inherit it)::

    export VERL_USE_EXTERNAL_MODULES=audio_reward.trainer_plugin.cpu.enable VERL_PLATFORM=cpu

then launch ``python -m verl.trainer.main_ppo`` with ``actor_rollout_ref.actor.strategy=fsdp2``,
``actor_rollout_ref.model.override_config.attn_implementation=sdpa``, ``+ray_kwargs.ray_init.num_gpus=1``
and the rollout's ``enable_sleep_mode=false`` (:data:`REQUIRED_OVERRIDES`; ``scripts/train_cpu.sh`` runs a
whole loop this way).  Importing :mod:`.enable` registers :class:`~.platform.CPUPlatform` and applies the
patches of :mod:`.patches`; nothing in site-packages is edited.  This module imports no verl.
"""

from __future__ import annotations

__all__ = ["ENABLE_MODULE", "REQUIRED_OVERRIDES"]

ENABLE_MODULE = "audio_reward.trainer_plugin.cpu.enable"
"""The module to name in ``VERL_USE_EXTERNAL_MODULES``."""

REQUIRED_OVERRIDES = (
    # FSDP1 hard-codes sync_module_states=True, which torch refuses on the CPU (see patches.fsdp2_engine_on_cpu)
    "actor_rollout_ref.actor.strategy=fsdp2",
    "actor_rollout_ref.ref.strategy=fsdp2",
    # verl's default is flash_attention_2 (verl/workers/config/model.py line 185), a CUDA kernel
    "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    # vLLM refuses sleep mode on the CPU; verl turns it on by default (verl/workers/config/rollout.py line 268)
    "+actor_rollout_ref.rollout.enable_sleep_mode=false",
    # Ray's resource pools count GPUs (verl/single_controller/ray/base.py lines 148, 230-239): one logical GPU
    "+ray_kwargs.ray_init.num_gpus=1",
)
"""verl settings a CPU run needs, as ``main_ppo`` command-line overrides."""
