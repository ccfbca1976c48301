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

import difflib
import warnings
from collections.abc import Mapping
from typing import Any

from . import verl_omni_score

VERL_KEYWORDS = frozenset({"reward_router_address", "reward_model_tokenizer", "model_name"})
"""Keywords verl's reward managers (and verl-omni's ``AudioRewardManager``) pass when a reward model is
configured; they concern a reward model, not this scorer, so they are accepted and not used."""

SETTINGS = ("server_url", "solution_audio", "timeout", "max_retries", "retry_backoff", "api_key")
"""The keywords this function reads from ``reward_kwargs``, in the order of its signature."""


def check_keywords(extra: Mapping[str, Any]) -> None:
    """Raise TypeError for a keyword that is neither a setting nor one verl passes.

    A misspelt ``reward_kwargs`` entry (``time_out=``) would otherwise be dropped and the run would go on
    with the default, so the error names the keyword, the closest setting and every accepted one.
    """
    unknown = sorted(set(extra) - VERL_KEYWORDS)
    if not unknown:
        return
    close = {name: difflib.get_close_matches(name, SETTINGS, n=1) for name in unknown}
    hints = [f"{name!r} (did you mean {close[name][0]!r}?)" if close[name] else repr(name) for name in unknown]
    raise TypeError(f"compute_score() got unexpected keyword argument(s) {', '.join(hints)}; "
                    f"it takes {', '.join(SETTINGS)}")


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
    **verl_keywords: Any,
) -> dict[str, Any]:
    """``{"score": reward, **diagnostics}`` for one rollout; raises a ``ScorerError`` on failure.

    ``solution_str`` (the decoded response tokens) is not used: the speech is scored, not its tokens.
    The keywords verl passes for a reward model (:data:`VERL_KEYWORDS`, e.g. ``reward_router_address``)
    are accepted and not used; any other unknown keyword raises TypeError naming the closest setting.
    """
    check_keywords(verl_keywords)
    if verl_keywords.get("reward_router_address"):
        # a warning, not a log line: Python shows one per reward model and place, with no state of ours
        warnings.warn(f"a reward model is configured ({verl_keywords.get('model_name')} at "
                      f"{verl_keywords['reward_router_address']}) and verl passes its router to compute_score, "
                      "which scores with the audio-reward scorer only: the reward model serves no request of this "
                      "reward", RuntimeWarning, stacklevel=2)
    return await verl_omni_score.compute_score(solution_audio, ground_truth, extra_info, data_source,
                                               server_url=server_url, timeout=timeout, max_retries=max_retries,
                                               retry_backoff=retry_backoff, api_key=api_key)
