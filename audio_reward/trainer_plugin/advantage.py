"""``grpo_masked``: verl's GRPO advantage with failed samples kept out.

Under ``failure_policy=mask`` a sample whose scoring failed gets a NaN reward
(``score_failed=1``).  This estimator, selected with
``algorithm.adv_estimator=grpo_masked``:

1. computes verl's own GRPO advantage on the scored samples only, so a failed
   sample changes neither its group's mean nor its std;
2. gives failed samples advantage 0 and zeroes their ``response_mask`` row in
   place (it is the batch's tensor), so their tokens leave the policy loss, the
   KL loss and the entropy term;
3. replaces their NaN rewards with 0 in place, so reward metrics stay finite
   (``score_failed`` tells them apart).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._verl import core_algos

ESTIMATOR_NAME = "grpo_masked"


def compute_grpo_masked_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO outcome advantage over the samples with a finite reward; see the module docstring."""
    if config is not None:
        norm_adv_by_std_in_grpo = bool(getattr(config, "norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo))
    failed = torch.isnan(token_level_rewards).any(dim=-1)
    advantages = torch.zeros_like(token_level_rewards)
    ok = (~failed).nonzero(as_tuple=True)[0]
    if len(ok):
        adv_ok, _ = core_algos().compute_grpo_outcome_advantage(
            token_level_rewards=token_level_rewards[ok],
            response_mask=response_mask[ok],
            index=np.asarray(index)[ok.cpu().numpy()],
            epsilon=epsilon,
            norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
        )
        advantages[ok] = adv_ok.to(advantages.dtype)
    if failed.any():
        with torch.no_grad():
            response_mask[failed] = 0
            token_level_rewards.nan_to_num_(nan=0.0)
    return advantages, advantages


def register() -> None:
    """Add ``grpo_masked`` to verl's advantage-estimator registry (idempotent)."""
    algos = core_algos()
    if ESTIMATOR_NAME not in getattr(algos, "ADV_ESTIMATOR_REGISTRY", {}):
        algos.register_adv_est(ESTIMATOR_NAME)(compute_grpo_masked_advantage)
