"""verl's platform for a machine with no accelerator: the device is ``cpu``, collectives go over gloo.

verl 0.9.1 resolves its device through a platform registry
(``verl/plugin/platform/platform_manager.py``); with no platform answering for
the machine it falls back to ``nvidia`` (lines 114-117) and fails at the first
CUDA call.  :class:`CPUPlatform` is registered as ``cpu`` and selected with
``VERL_PLATFORM=cpu``.  Ray still schedules verl's workers on a *logical* GPU
(``ray_init.num_gpus``): its resource pools count GPUs
(``verl/single_controller/ray/base.py`` lines 148, 230-239).
"""

from __future__ import annotations

import os
import platform as host
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

PLATFORM_NAME = "cpu"


def _no_op(*_: Any, **__: Any) -> None:
    return None


def _memory_info(*_: Any) -> tuple[int, int]:
    page = os.sysconf("SC_PAGE_SIZE")
    return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page


def _rss(*_: Any) -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:  # pages: size, resident, ...
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def device_module() -> ModuleType:
    """``torch.cpu`` with the ``torch.cuda`` calls verl makes on whatever device it runs.

    verl calls these through ``get_torch_device()`` unconditionally: cache and
    memory queries around every phase, the RNG state around checkpoints, and
    ``get_device_name`` in its FLOPs counter (``verl/utils/flops_counter.py``
    line 80, reached by the first actor update).  On a CPU there is no cache to
    empty and memory is the process's own.
    """
    module = ModuleType("audio_reward_cpu_device")
    module.__dict__.update({name: getattr(torch.cpu, name) for name in dir(torch.cpu) if not name.startswith("_")})
    module.__dict__.update(
        **dict.fromkeys(("empty_cache", "ipc_collect", "reset_peak_memory_stats", "set_per_process_memory_fraction",
                         "set_device"), _no_op),
        **dict.fromkeys(("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"), _rss),
        manual_seed=torch.manual_seed, manual_seed_all=torch.manual_seed,
        get_rng_state=lambda *_: torch.get_rng_state(), set_rng_state=lambda state, *_: torch.set_rng_state(state),
        mem_get_info=_memory_info, get_device_name=lambda *_: host.processor() or host.machine() or "cpu",
        device_count=lambda: 1, current_device=lambda: "cpu",
    )
    return module


@PlatformRegistry.register(platform=PLATFORM_NAME)
class CPUPlatform(PlatformBase):
    """Device ``cpu``, backend gloo, no IPC, no profiler; Ray's logical GPU holds each worker's place."""

    # verl's abstract properties, answered by class attributes: they never change
    device_name = vendor_name = PLATFORM_NAME
    device_module = device_module()

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: a CUDA machine must not pick it; VERL_PLATFORM=cpu selects it.
        return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME

    def current_device(self) -> str:  # type: ignore[override, unused-ignore]
        # verl moves tensors with .to(get_device_id()) (verl/utils/fsdp_utils.py line 507, protocol.py line
        # 1336...): an int there names an accelerator, which torch refuses on a CPU; "cpu" names the device.
        return "cpu"

    def device_count(self) -> int:
        return 1

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed  # one device: its seed is every device's

    # nothing to do on a CPU: no device to select or wait for, no allocator or cache to tune, no profiler; and no
    # CUDA runtime (cudart() is None)
    set_device = synchronize = set_allocator_settings = empty_cache = profiler_start = profiler_stop = cudart = _no_op

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets it for the logical GPU it hands out; nothing on a CPU reads it.
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def rollout_env_vars(self) -> dict[str, str]:
        return {"VLLM_TARGET_DEVICE": "cpu"}
