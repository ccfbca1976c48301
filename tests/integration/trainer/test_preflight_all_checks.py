"""``audio-reward preflight`` reports every problem in one run, and names verl-omni's own commit only (issue 40,
finding 10).

Without verl-omni (its config cannot compose) preflight used to stop at that first check; like ``run.sh``'s
dry run, which lists every missing variable at once, it now runs the scorer, data and model checks on what
the recipe itself sets.  The commands run as a user runs them, in this test's environment (the trainer's,
where hydra and pyarrow are, or the server's, where they are not: each missing library is then its
check's one line).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from audio_reward.trainer_plugin.omni_source import read_registrations
from tests.testkit.server import REPO_ROOT

TTS_VARIABLES = ("MODEL_PATH", "TRAIN_FILE", "VAL_FILE", "SPK_EMBED_PATH", "AUDIO_REWARD_URL")


def _preflight(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if k not in (*TTS_VARIABLES, "VERL_OMNI_SRC") and not k.startswith("AUDIO_REWARD_")}
    return subprocess.run([sys.executable, "-m", "audio_reward.cli", "preflight", "qwen3_tts_grpo", *args],
                          cwd=tmp_path, env={**clean, "PYTHONPATH": str(REPO_ROOT), **env},
                          capture_output=True, text=True, timeout=120, check=False)


def _checks(out: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line.startswith("["):
            status, _, rest = line.partition("] ")
            name, _, message = rest.partition(": ")
            found.setdefault(name, []).append(f"{status[1:]} {message}")
    return found


@pytest.fixture
def no_verl_omni() -> None:
    import importlib.util

    if importlib.util.find_spec("verl_omni") is not None:
        pytest.skip("verl-omni is installed in this environment")


@pytest.mark.usefixtures("no_verl_omni")
def test_without_verl_omni_or_variables_every_check_still_reports(tmp_path: Path) -> None:
    proc = _preflight(tmp_path, {})
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    checks = _checks(proc.stdout)
    config = " ".join(checks["config"])
    assert ("verl-omni" in config or "hydra is not installed" in config), config
    assert all(f"set {name}" in config for name in TTS_VARIABLES), config  # every missing variable, at once
    for name in ("scorer", "data", "model", "group size", "reward"):
        assert name in checks, (name, proc.stdout)
    assert checks["scorer"] == ["FAIL reward.audio_reward: no scorer URL: set reward.audio_reward.server_url "
                                "(or AUDIO_REWARD_URL)"]
    assert checks["model"] == ["FAIL actor_rollout_ref.model.path is not set"]
    assert proc.stdout.splitlines()[-1].startswith("preflight: ")


@pytest.mark.usefixtures("no_verl_omni")
def test_without_verl_omni_the_variables_given_are_checked(tmp_path: Path, scorer_url: str) -> None:
    (tmp_path / "model").mkdir()
    proc = _preflight(tmp_path, {"AUDIO_REWARD_URL": scorer_url, "MODEL_PATH": str(tmp_path / "model"),
                                 "TRAIN_FILE": str(tmp_path / "train.parquet"), "AUDIO_REWARD_PREFLIGHT_PROBE_S": "0"},
                      "--skip-data")
    checks = _checks(proc.stdout)
    assert proc.returncode == 1, proc.stdout
    assert checks["scorer"][0].startswith(f"ok {scorer_url}: protocol 1"), proc.stdout
    assert any(str(tmp_path / "model") in m and m.startswith("FAIL") for m in checks["model"]), proc.stdout
    config = " ".join(checks["config"])
    assert "set VAL_FILE" in config and "TRAIN_FILE=" in config and "does not exist" in config
    assert "set MODEL_PATH" not in config and "set AUDIO_REWARD_URL" not in config


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True,
                          env=env).stdout.strip()


def _verl_omni_tree(root: Path) -> Path:
    package = root / "verl_omni"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    return package


def test_verl_omni_inside_another_repository_is_not_named_by_its_commit(tmp_path: Path) -> None:
    outer = tmp_path / "project"
    package = _verl_omni_tree(outer / "third_party" / "verl-omni")
    _git(outer, "init", "-q")
    _git(outer, "add", ".")
    _git(outer, "commit", "-q", "-m", "vendored")
    found = read_registrations(package)
    assert found.commit is None, f"{found.describe()} names the enclosing project's commit"
    assert "commit" not in found.describe()
    # verl-omni's own checkout is named by its own commit, also when it sits inside another repository.
    _git(package.parent, "init", "-q")
    _git(package.parent, "add", ".")
    _git(package.parent, "commit", "-q", "-m", "verl-omni")
    own = _git(package.parent, "rev-parse", "HEAD")
    assert read_registrations(package).commit == own != _git(outer, "rev-parse", "HEAD")
