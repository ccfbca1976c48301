"""Where the ASR engine runs: ``--device auto`` (the default) resolved to ``cuda`` or ``cpu`` before it loads.

The answer comes from the library that places the engine's model on a GPU (CTranslate2 for faster-whisper,
torch for the others), so "a GPU is there" means "this engine can use it".  Resolving once, before the engine
is built, gives every engine, the scheduler (two batches in flight on a GPU, one on the CPU) and ``/v1/info``
the same concrete device, and lets the start-up line say what was picked and why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

AUTO = "auto"

CUDA_PROBES = {"faster-whisper": "ctranslate2"} | dict.fromkeys(("transformers", "vllm", "funasr"), "torch")
"""Per engine, the library that places the model on a GPU, and so the one asked whether it sees one."""


def cuda_devices(library: str) -> int:
    """The CUDA devices ``library`` (``ctranslate2`` or ``torch``) sees in this process (0 without a GPU)."""
    if library == "ctranslate2":
        import ctranslate2

        return int(ctranslate2.get_cuda_device_count())
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


@dataclass(frozen=True)
class DevicePick:
    """The device an engine runs on and, for ``auto``, why (``auto: ctranslate2 sees 2 CUDA devices``)."""

    device: str
    reason: str = ""

    def describe(self) -> str:
        """``cuda (auto: torch sees 1 CUDA device)``, or the device alone when it was given."""
        return f"{self.device} ({self.reason})" if self.reason else self.device


def pick_device(engine: str, device: str) -> DevicePick:
    """``device`` as given, or for ``auto`` ``cuda`` when the engine's library sees a CUDA device, else ``cpu``.

    An engine with no known library (a test or third-party engine) keeps ``auto`` and decides itself.
    """
    library = CUDA_PROBES.get(engine)
    if device != AUTO or library is None:
        return DevicePick(device)
    try:
        count = cuda_devices(library)
    except (ImportError, RuntimeError, AttributeError) as exc:  # no library, or a broken driver: the CPU works
        return DevicePick("cpu", f"auto: {library} cannot look for a CUDA device ({exc})")
    if count <= 0:
        return DevicePick("cpu", f"auto: {library} sees no CUDA device")
    return DevicePick("cuda", f"auto: {library} sees {count} CUDA device{'s' if count > 1 else ''}")


def set_up_torch(device: str, cpu_threads: int) -> str:
    """torch's CPU threads set to ``cpu_threads`` (unless 0), and the device a torch model runs on: ``device``,
    with ``auto`` read as cuda when a GPU is visible, else cpu; a CUDA device torch does not see is refused."""
    import torch

    if cpu_threads:
        torch.set_num_threads(cpu_threads)
    if device == AUTO:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} requested but torch sees no CUDA device")
    return device
