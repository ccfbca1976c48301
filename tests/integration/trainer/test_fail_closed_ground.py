"""The fail-closed sampler checks the verl internals it hooks before it starts, on the installed verl's classes.

It starts on verl 0.9.1's replay buffers, and refuses, in one line naming what differs, a replay buffer whose
hook is renamed, takes an argument, is never called by verl's sampling, or whose failed groups or sampler
settings are kept under another name. Pre-flight runs the same check, so such a verl is refused in seconds, not at
the first failure.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="the fail-closed sampler hooks verl's v1 replay buffer (trainer environment)")

from omegaconf import OmegaConf
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

from audio_reward.trainer_plugin import fail_closed, preflight
from audio_reward.trainer_plugin.fail_closed import (
    FailClosedReplayBuffer,
    FailClosedSyncReplayBuffer,
    UnsupportedVerlError,
    ground_problems,
)


def build(cls: type, mode: str = "sync") -> Any:
    return cls(mode, OmegaConf.create({}), None, "drop", OmegaConf.create({"max_failed_groups": 0}))


def test_it_starts_on_the_installed_verl() -> None:
    assert ground_problems(ReplayBuffer) == () and ground_problems(ReplayBufferAsync) == ()
    assert build(FailClosedSyncReplayBuffer).max_failed_groups == 0
    assert build(FailClosedReplayBuffer, "colocate_async").failed_groups == {}


def guarded(base: type) -> type:
    return type(f"Guarded{base.__name__}", (fail_closed._FailClosedMixin, base), {})


class RenamedHook(ReplayBuffer):
    _sync_metadata_from_transfer_queue = None

    def _sync_metadata(self) -> None:
        ReplayBuffer._sync_metadata_from_transfer_queue(self)


class HookWithArgument(ReplayBuffer):
    def _sync_metadata_from_transfer_queue(self, partition_id: str) -> None:  # type: ignore[override]
        super()._sync_metadata_from_transfer_queue()


class RenamedFailures(ReplayBuffer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed_keys = self.__dict__.pop("failure_keys")


class RenamedKwargs(ReplayBuffer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sampler_options = self.__dict__.pop("sampler_kwargs")


@pytest.mark.parametrize(("base", "problem"), [
    (RenamedHook, "RenamedHook._sync_metadata_from_transfer_queue is not a method"),
    (HookWithArgument, "requires partition_id; the sampler calls it with no argument"),
    (RenamedFailures, "RenamedFailures.__init__ sets no failure_keys"),
    (RenamedKwargs, "RenamedKwargs.__init__ sets no sampler_kwargs"),
])
def test_it_refuses_a_verl_whose_hooked_internals_differ(base: type, problem: str) -> None:
    with pytest.raises(UnsupportedVerlError) as caught:
        build(guarded(base))
    message = str(caught.value)
    assert problem in message and "\n" not in message
    assert "checked on verl 0.9.0.dev (8a694930), 0.9.1 and 0.10.0.dev (1dda039b)" in message


def test_a_hook_that_verls_sampling_never_calls_is_refused() -> None:
    # verl's own method, moved to a class whose sampling never calls it
    quiet = type("Quiet", (), {"_sync_metadata_from_transfer_queue":
                               ReplayBuffer._sync_metadata_from_transfer_queue})
    assert ground_problems(quiet) == ("Quiet's sampling never calls self._sync_metadata_from_transfer_queue(), "
                                      "so the check would never run",)


def test_preflight_reads_the_same_check() -> None:
    config = {"trainer": {"use_v1": True, "v1": {"trainer_mode": "sync", "sampler": {"custom_sampler": {
        "path": f"pkg://{fail_closed.__name__}", "name": "FailClosedSyncReplayBuffer"}}}}}
    (check,) = preflight.check_fail_closed(config)
    assert check.ok, check.message


@pytest.mark.parametrize("variable", ["VERL_SRC", "VERL_OMNI_PIN_SRC"])
def test_other_verls_replay_buffers_pass(variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """verl's replay buffer from a checkout (newest main in VERL_SRC, verl-omni's pin in VERL_OMNI_PIN_SRC),
    executed beside the installed verl, whose modules it imports."""
    source = Path(os.environ.get(variable, "/nonexistent")) / "verl" / "trainer" / "ppo" / "v1" / "replay_buffer.py"
    if not source.is_file():
        pytest.skip(f"{variable} names no verl checkout with a v1 replay buffer (CI has none)")
    spec = importlib.util.spec_from_file_location(f"checkout_replay_buffer_{variable}", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # inspect reads a class's source through its module
    spec.loader.exec_module(module)
    for name in ("ReplayBuffer", "ReplayBufferAsync"):
        if hasattr(module, name):
            assert ground_problems(getattr(module, name)) == ()
