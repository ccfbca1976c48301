from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest

from fault_server import FaultServer


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


@pytest.fixture
def tone() -> np.ndarray:
    """0.25 s of a 440 Hz tone at 16 kHz."""
    t = np.arange(4000, dtype=np.float32) / 16000
    return (0.1 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
