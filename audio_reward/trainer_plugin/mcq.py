"""The multiple-choice reward as verl calls it: ``custom_reward_function`` for the omni-thinker recipe.

The scoring itself is pure text work and lives in :mod:`audio_reward.scoring.choice`; this adapter reads verl's
arguments (the options travel in ``extra_info["options"]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audio_reward.scoring.choice import score_choice


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    format_weight: float = 0.0,
    **_: Any,
) -> dict[str, float]:
    """verl ``custom_reward_function`` entry: options come from ``extra_info["options"]``."""
    return score_choice(solution_str, ground_truth, (extra_info or {}).get("options"), format_weight=format_weight)
