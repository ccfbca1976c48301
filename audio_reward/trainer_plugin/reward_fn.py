"""``compute_score`` for verl's ``reward.custom_reward_function``, over the scorer client.

Use it with any reward manager that passes verl's signature
(``naive``, ``dapo``, verl-omni's ``AudioRewardManager``)::

    reward.custom_reward_function.path=pkg://audio_reward.trainer_plugin.reward_fn
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.server_url=http://scorer:8000

The audio comes from ``extra_info["audio"]`` / ``extra_info["audio_sample_rate"]``
(or ``solution_audio=(waveform, rate)`` as verl-omni passes it); the target
text is ``ground_truth``.  Failures raise: a reward function has no way to
mask a sample, so it never returns a made-up score.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..scorer_client import compute_score as _client_compute_score


async def compute_score(
    data_source: str | None = None,
    solution_str: str | None = None,
    ground_truth: str | None = None,
    extra_info: Mapping[str, Any] | None = None,
    *,
    server_url: str,
    solution_audio: tuple[Any, int] | None = None,
    timeout: float = 120.0,
    max_retries: int = 2,
    retry_backoff: float = 0.5,
    api_key: str | None = None,
    **_: Any,
) -> dict[str, Any]:
    """``{"score": reward, **diagnostics}`` for one rollout; raises a ``ScorerError`` on failure.

    ``solution_str`` (the decoded response tokens) is not used: the speech is scored, not its tokens.
    Extra ``reward_kwargs`` verl passes (e.g. ``reward_router_address``) are ignored.
    """
    return await _client_compute_score(
        solution_audio=solution_audio,
        ground_truth=ground_truth,
        extra_info=extra_info,
        data_source=data_source,
        server_url=server_url,
        timeout=timeout,
        max_retries=max_retries,
        retry_backoff=retry_backoff,
        api_key=api_key,
    )
