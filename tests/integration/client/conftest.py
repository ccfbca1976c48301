from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tests.testkit import speech
from tests.testkit.fault_server import FaultServer


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


@pytest.fixture
def tone() -> np.ndarray:
    """0.25 s of a 440 Hz tone at 16 kHz."""
    return speech.tone(0.25, hz=440)
