"""The server limits numpy's BLAS threads in its process (the ``numpy_threads`` setting)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

threadpoolctl = pytest.importorskip("threadpoolctl", reason="the server extra (threadpoolctl) is not installed")

from audio_reward.scorer_server.app import limit_numpy_threads  # noqa: E402


@pytest.fixture
def restored() -> Iterator[None]:
    original = threadpoolctl.threadpool_info()
    yield
    for pool in original:
        threadpoolctl.threadpool_limits(limits=pool["num_threads"], user_api=pool["user_api"])


def _blas_threads() -> list[int]:
    return [pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"]


def test_the_setting_limits_numpys_blas_and_zero_leaves_it(restored: None) -> None:
    import numpy as np

    np.ones((64, 64)) @ np.ones((64, 64))  # numpy's BLAS is loaded
    assert _blas_threads(), "numpy's BLAS library is not visible to threadpoolctl"
    threadpoolctl.threadpool_limits(limits=2, user_api="blas")
    limit_numpy_threads(0)
    assert set(_blas_threads()) == {2}
    limit_numpy_threads(1)
    assert set(_blas_threads()) == {1}
