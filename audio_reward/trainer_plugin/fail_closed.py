"""Stop verl's v1 trainer when a reward fails, instead of training on without the group.

In verl's v1 trainer (``trainer.use_v1``, forced by verl-omni's ``main_omni``)
an exception raised while scoring a rollout never reaches the trainer loop:
``AgentLoopWorkerTQ._run_prompt`` (``verl/trainer/ppo/v1/agent_loop_tq.py``
lines 133-143 in verl 0.9.1) logs it and tags the GRPO group ``failure``.  The
replay buffer then either keeps the group sampleable with its missing
trajectories padded (``ReplayBuffer``, trainer mode ``sync``;
``replay_buffer.py`` lines 112-113 and 341) or evicts it and refills a fresh
prompt (``ReplayBufferAsync``, which ``trainer_base.py`` line 153 picks for
every other mode, verl-omni's ``omni_sync`` included; ``replay_buffer.py``
lines 531-539 and 564-584).  Either way training goes on.

verl's supported hook is the custom sampler
(``trainer.v1.sampler.custom_sampler.{path,name}``, built by
``PPOTrainer._build_replay_buffer``, ``trainer_base.py`` lines 139-185).
These subclasses keep verl's sampling and raise :class:`RewardFailureError`
once more than ``max_failed_groups`` groups (train or validation) have
failed; the default 0 stops at the first.  The error names each failed
group's ``uid`` and, when the reward manager wrote one, the failure record
(sample, target text, cause) from ``failure_log``.

Select them with::

    trainer.v1.sampler.custom_sampler.path=pkg://audio_reward.trainer_plugin.fail_closed
    trainer.v1.sampler.custom_sampler.name=FailClosedReplayBuffer        # trainer modes other than sync
    +trainer.v1.sampler.sampler_kwargs.max_failed_groups=0
    +trainer.v1.sampler.sampler_kwargs.failure_log=outputs/run/reward_failures.jsonl
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ._verl import replay_buffers

ReplayBuffer: Any
ReplayBufferAsync: Any
ReplayBuffer, ReplayBufferAsync = replay_buffers()

logger = logging.getLogger(__name__)

SAMPLER_FOR_MODE = MappingProxyType({"sync": "FailClosedSyncReplayBuffer"})
"""The fail-closed sampler matching verl's built-in choice per trainer mode (other modes: the async one)."""
DEFAULT_SAMPLER = "FailClosedReplayBuffer"


class RewardFailureError(RuntimeError):
    """More GRPO groups failed (a reward or rollout error) than the run tolerates."""


def read_failures(path: str | Path | None) -> list[dict[str, Any]]:
    """The failure records of ``failure_log`` (written by the reward manager), oldest first."""
    if not path or not Path(path).is_file():
        return []
    records = []
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(raw))
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
    return records


class _FailClosedMixin:
    """Put before a verl replay buffer: checks the failed groups each time it syncs with the TransferQueue."""

    failure_keys: Mapping[str, set]
    sampler_kwargs: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_fail_closed(self.sampler_kwargs)

    def _sync_metadata_from_transfer_queue(self) -> None:
        super()._sync_metadata_from_transfer_queue()  # type: ignore[misc]
        self._check_failures()

    def _init_fail_closed(self, sampler_kwargs: Any) -> None:
        kwargs = dict(sampler_kwargs or {})
        self.max_failed_groups = int(kwargs.get("max_failed_groups", 0))
        if self.max_failed_groups < 0:
            raise ValueError(f"max_failed_groups must be >= 0, got {self.max_failed_groups}")
        self.failure_log = kwargs.get("failure_log")
        self.failed_groups: dict[str, str] = {}
        """uid -> partition of every failed group seen so far (evicted ones included)."""

    def _check_failures(self) -> None:
        for partition_id, uids in self.failure_keys.items():
            for uid in uids:
                self.failed_groups.setdefault(uid, partition_id)
        if len(self.failed_groups) <= self.max_failed_groups:
            if self.failed_groups:
                logger.warning("%d failed group(s) so far, tolerated up to %d", len(self.failed_groups),
                               self.max_failed_groups)
            return
        raise RewardFailureError(self._message())

    def _message(self) -> str:
        records = read_failures(self.failure_log)
        lines = [(f"{len(self.failed_groups)} GRPO group(s) failed (max_failed_groups={self.max_failed_groups}); "
                  "the run stops instead of training without them:")]
        for uid, partition in sorted(self.failed_groups.items()):
            causes = [r.get("message", "") for r in records if str(r.get("uid")) == uid]
            cause = causes[-1] if causes else ("no reward failure recorded: see the AgentLoopWorker log line "
                                               f"'Error in _run_prompt for uid={uid}'")
            lines.append(f"  [{partition}] uid={uid}: {cause}")
        return "\n".join(lines)


class FailClosedReplayBuffer(_FailClosedMixin, ReplayBufferAsync):
    """verl's ``ReplayBufferAsync`` (its choice for every trainer mode but ``sync``; the single
    ``ReplayBuffer`` on a verl without it) that stops on failed groups."""


class FailClosedSyncReplayBuffer(_FailClosedMixin, ReplayBuffer):
    """verl's sync ``ReplayBuffer`` (trainer mode ``sync``) that stops on failed groups."""
