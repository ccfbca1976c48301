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

Both rest on three things of verl's ``ReplayBuffer``: the method
``_sync_metadata_from_transfer_queue(self)``, called by verl's own sampling,
the ``failure_keys`` mapping (partition -> failed group uids) it refills, and
the ``sampler_kwargs`` it keeps.  They are private, so at start-up (and in
``audio-reward preflight``) :func:`ground_problems` checks each of them, and
the sampler refuses to start with :class:`UnsupportedVerlError` where one
differs, instead of letting a failed group train on unnoticed.  Checked to
hold: verl 0.9.0.dev at 8a694930 (verl-omni main's pin before the Qwen3-TTS
merge), 0.9.1 (PyPI) and 0.10.0.dev at 1dda039b (verl-project/verl, August
2026); verl-omni's current pin fefb0802 is checked by this same check when it
starts there (docs/training.md section 7).

Select them with::

    trainer.v1.sampler.custom_sampler.path=pkg://audio_reward.trainer_plugin.fail_closed
    trainer.v1.sampler.custom_sampler.name=FailClosedReplayBuffer        # trainer modes other than sync
    +trainer.v1.sampler.sampler_kwargs.max_failed_groups=0
    +trainer.v1.sampler.sampler_kwargs.failure_log=outputs/run/reward_failures.jsonl
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ._verl import replay_buffers
from .reward_curve import read_json_lines

ReplayBuffer: Any
ReplayBufferAsync: Any
ReplayBuffer, ReplayBufferAsync = replay_buffers()

logger = logging.getLogger(__name__)

SAMPLER_FOR_MODE = MappingProxyType({"sync": "FailClosedSyncReplayBuffer"})
"""The fail-closed sampler matching verl's built-in choice per trainer mode (other modes: the async one)."""
DEFAULT_SAMPLER = "FailClosedReplayBuffer"


HOOK = "_sync_metadata_from_transfer_queue"
FAILURES = "failure_keys"
KWARGS = "sampler_kwargs"
CHECKED_VERL = "verl 0.9.0.dev (8a694930), 0.9.1 and 0.10.0.dev (1dda039b)"


class RewardFailureError(RuntimeError):
    """More GRPO groups failed (a reward or rollout error) than the run tolerates."""


class UnsupportedVerlError(RuntimeError):
    """The installed verl's replay buffer lacks what the fail-closed sampler hooks."""


def _source(cls: type) -> str:
    try:
        return inspect.getsource(cls)
    except (OSError, TypeError):
        return ""


def ground_problems(base: type) -> tuple[str, ...]:
    """What the sampler hooks in verl's replay buffer class ``base`` and finds missing or changed."""
    name = base.__name__
    hook = getattr(base, HOOK, None)
    if not inspect.isfunction(hook):
        return (f"{name}.{HOOK} is not a method",)
    problems = []
    if required := [p.name for p in list(inspect.signature(hook).parameters.values())[1:]
                    if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]:
        problems.append(f"{name}.{HOOK} requires {', '.join(required)}; the sampler calls it with no argument")
    if f"self.{HOOK}()" not in "".join(_source(c) for c in base.__mro__ if c is not object):
        problems.append(f"{name}'s sampling never calls self.{HOOK}(), so the check would never run")
    if FAILURES not in inspect.getsource(hook):
        problems.append(f"{name}.{HOOK} does not refill {FAILURES}, where the failed groups were listed")
    return tuple(problems)


def refuse_unsupported(base: type, problems: Sequence[str]) -> None:
    if problems:
        raise UnsupportedVerlError(f"the fail-closed sampler cannot guard this verl's {base.__name__} "
                                   f"({'; '.join(problems)}); it is checked on {CHECKED_VERL}")


class _FailClosedMixin:
    """Put before a verl replay buffer: checks the failed groups each time it syncs with the TransferQueue."""

    failure_keys: Mapping[str, set]
    sampler_kwargs: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        base = self.verl_base()
        refuse_unsupported(base, ground_problems(base))
        super().__init__(*args, **kwargs)
        present = {FAILURES: isinstance(getattr(self, FAILURES, None), Mapping), KWARGS: hasattr(self, KWARGS)}
        refuse_unsupported(base, [f"{base.__name__}.__init__ sets no {attr}" for attr, ok in present.items() if not ok])
        kwargs = dict(self.sampler_kwargs or {})
        self.max_failed_groups = int(kwargs.get("max_failed_groups", 0))
        if self.max_failed_groups < 0:
            raise ValueError(f"max_failed_groups must be >= 0, got {self.max_failed_groups}")
        self.failure_log = kwargs.get("failure_log")
        self.failed_groups: dict[str, str] = {}
        """uid -> partition of every failed group seen so far (evicted ones included)."""

    @classmethod
    def verl_base(cls) -> type:
        """The verl class this mixin overrides: the next one after the mixin in the MRO."""
        return cls.__mro__[cls.__mro__.index(_FailClosedMixin) + 1]

    def _sync_metadata_from_transfer_queue(self) -> None:
        super()._sync_metadata_from_transfer_queue()  # type: ignore[misc]
        for partition_id, uids in self.failure_keys.items():
            for uid in uids:
                self.failed_groups.setdefault(uid, partition_id)
        if len(self.failed_groups) > self.max_failed_groups:
            raise RewardFailureError(self._message())
        if self.failed_groups:
            logger.warning("%d failed group(s) so far, tolerated up to %d", len(self.failed_groups),
                           self.max_failed_groups)

    def _message(self) -> str:
        # the failure records the reward manager wrote, oldest first: a later one of a uid wins
        records = read_json_lines(self.failure_log) if self.failure_log and Path(self.failure_log).is_file() else []
        latest = {str(r.get("uid")): r.get("message", "") for r in records}
        lines = [(f"{len(self.failed_groups)} GRPO group(s) failed (max_failed_groups={self.max_failed_groups}); "
                  "the run stops instead of training without them:")]
        for uid, partition in sorted(self.failed_groups.items()):
            cause = latest.get(uid, "no reward failure recorded: see the AgentLoopWorker log line "
                                    f"'Error in _run_prompt for uid={uid}'")
            lines.append(f"  [{partition}] uid={uid}: {cause}")
        return "\n".join(lines)


class FailClosedReplayBuffer(_FailClosedMixin, ReplayBufferAsync):
    """verl's ``ReplayBufferAsync`` (its choice for every trainer mode but ``sync``; the single
    ``ReplayBuffer`` on a verl without it) that stops on failed groups."""


class FailClosedSyncReplayBuffer(_FailClosedMixin, ReplayBuffer):
    """verl's sync ``ReplayBuffer`` (trainer mode ``sync``) that stops on failed groups."""
