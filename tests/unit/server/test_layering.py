"""The server's middle is layered as docs/architecture.md draws it: services over one engine client, no reach-back.

Read from the source's own import statements, so a new import that crosses a layer fails here before it
becomes a habit.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[3] / "audio_reward" / "scorer_server"


def imports_of(module: Path) -> set[str]:
    """The ``audio_reward.scorer_server`` modules ``module`` imports, as paths relative to the package."""
    package = module.parent.relative_to(SERVER).parts
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level + 1])
                name = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module and node.module.startswith("audio_reward.scorer_server."):
                name = node.module.removeprefix("audio_reward.scorer_server.")
            else:
                continue
            found.add(name)
            found.update(f"{name}.{alias.name}" for alias in node.names)
    return found


def service(name: str) -> Path:
    return SERVER / "service" / f"{name}.py"


@pytest.mark.parametrize("below", ["engine_client", "scheduler", "dedup"])
def test_the_engine_client_and_what_it_owns_know_nothing_of_the_services_above(below: str) -> None:
    above = {"service.pipeline", "service.transcription", "service.info", "service.signals"}
    assert not imports_of(service(below)) & above


def test_the_signals_sit_beside_the_engine_client_under_the_pipeline() -> None:
    imported = imports_of(service("signals"))
    assert "service.scheduler.admit" in imported  # its queues answer as the engine's do
    assert not imported & {"service.engine_client", "service.pipeline", "service.transcription", "service.info"}


@pytest.mark.parametrize("name", ["transcription", "info"])
def test_transcription_and_info_take_the_engine_client_not_the_pipeline(name: str) -> None:
    imported = imports_of(service(name))
    assert "service.engine_client" in imported
    assert "service.pipeline" not in imported


def test_no_service_reaches_up_to_the_app_or_the_routers() -> None:
    for module in (SERVER / "service").glob("*.py"):
        crossing = {name for name in imports_of(module) if name == "app" or name.startswith(("app.", "http"))}
        assert not crossing, (module.name, crossing)


def test_every_submission_to_a_scheduler_goes_through_admit() -> None:
    submitting = {module.stem for module in (SERVER / "service").glob("*.py")
                  if "submit_many(" in module.read_text() and module.stem != "scheduler"}
    assert not submitting  # scheduler.admit, beside the schedulers, is the one caller
    admitting = {module.stem for module in (SERVER / "service").glob("*.py") if "service.scheduler.admit" in
                 imports_of(module)}
    assert admitting == {"engine_client", "signals"}
