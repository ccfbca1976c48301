"""vLLM plugin: on the CPU, linear layers read their live weight, so verl's weight sync reaches the rollout.

vLLM's CPU build repacks every linear (and the tied LM head's) weight once,
after loading (``vllm/model_executor/layers/linear.py`` lines 199-202 and
``vocab_parallel_embedding.py`` lines 63-65, into ``layers/utils.py``
``dispatch_cpu_unquantized_gemm``, lines 269-365), and drops the weight it
packed.  verl updates the rollout's weights in place after every step: the
update then fails (``linear.py`` line 1308, no weight to load into) or, for
the head, the rollout serves the packed copy of the first weights.  With this
plugin each layer multiplies by its ``weight`` parameter as it is now.

Loaded by vLLM in each of its processes (entry point ``vllm.general_plugins``),
and does something only where ``AUDIO_REWARD_VERL_CPU=1`` (set by
:mod:`audio_reward.trainer_plugin.cpu`): a vLLM that serves without verl's
weight sync keeps its faster packed kernels.
"""

from __future__ import annotations

import os
from typing import Any

import torch

ENABLE_VARIABLE = "AUDIO_REWARD_VERL_CPU"


def _live_weight_linear(layer: torch.nn.Module, remove_weight: bool = False, **_: Any) -> None:
    # vLLM calls layer.cpu_linear(x, weight, bias) with the layer's weight parameter as it is at the call
    layer.cpu_linear = torch.nn.functional.linear  # type: ignore[assignment, unused-ignore]  # vLLM sets a callable


def register() -> None:
    """Replace vLLM's CPU GEMM dispatch with ``torch.nn.functional.linear`` on the live weight (idempotent)."""
    if os.environ.get(ENABLE_VARIABLE) != "1":
        return
    from vllm.model_executor.layers import utils

    utils.dispatch_cpu_unquantized_gemm = _live_weight_linear
