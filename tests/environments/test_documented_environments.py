"""Each documented environment, built fresh from its install line, runs the commands the docs list for it.

``scripts/test_environments.sh`` builds the environments of ``environments.ENVIRONMENTS`` one after another in
one fresh venv (each README line makes its own venv, and its extras hold the line before's, so each stage
holds what that line's venv holds) and runs this
module once per environment with ``AUDIO_REWARD_ENV`` (its name) and ``AUDIO_REWARD_ENV_BIN`` (its ``bin``
folder). The tests run in the main environment, the commands in the one under test. No command's output may
hold a traceback: a missing package or model is one line that says what to install.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.docs.doc_commands import ENTRIES, Run
from tests.testkit.doc_blocks import LOCAL_SCORER, command_blocks, make_fixture, run_block
from tests.testkit.server import REPO_ROOT, free_port, wait_ready

from .environments import BY_NAME, CHECKS, Check

ENV_NAME = os.environ.get("AUDIO_REWARD_ENV", "")
ENV_BIN = Path(os.environ.get("AUDIO_REWARD_ENV_BIN", "/nonexistent"))

pytestmark = pytest.mark.skipif(
    ENV_NAME not in BY_NAME,
    reason="run by scripts/test_environments.sh, which builds each documented environment in a fresh venv",
)

DOC_BLOCKS = {b.key: b for b in command_blocks()}


def _no_traceback(proc: subprocess.CompletedProcess[str], what: str) -> None:
    output = proc.stdout + proc.stderr
    assert "Traceback (most recent call last)" not in output, f"{what} printed a traceback:\n{output[-4000:]}"


def _env() -> dict[str, str]:
    env = {**os.environ, "PATH": f"{ENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name in ("AUDIO_REWARD_URL", "PYTHONPATH", "VIRTUAL_ENV", "AUDIO_REWARD_ENV", "AUDIO_REWARD_ENV_BIN"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def env_scorer() -> Iterator[str]:
    """The README's server line, run in the environment under test (server and larger), on a free port."""
    if "server" not in BY_NAME[ENV_NAME].extras:
        pytest.skip(f"the {ENV_NAME} environment has no server")
    port = free_port()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"audio-reward-env-{ENV_NAME}-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(ENV_BIN / "audio-reward"), "serve", "--port", str(port)], env=_env(),
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_ready(f"http://127.0.0.1:{port}", 180, proc=proc, log_path=log)
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)


@pytest.fixture
def url(request: pytest.FixtureRequest) -> str:
    """A ready scorer: the environment's own where it has a server, else the main environment's."""
    if "server" in BY_NAME.get(ENV_NAME, BY_NAME["client"]).extras:
        return str(request.getfixturevalue("env_scorer"))
    return str(request.getfixturevalue("scorer_url"))


@pytest.mark.parametrize("check", CHECKS.get(ENV_NAME, ()), ids=lambda c: c.command[:60])
def test_command(check: Check, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    scorer = request.getfixturevalue("url") if check.scorer else None
    for name in check.files:
        make_fixture(name, tmp_path, scorer, ENV_BIN)
    command = check.command.format(repo=REPO_ROOT)
    if scorer is not None:  # a URL written without its scheme stays without it
        command = LOCAL_SCORER.sub(lambda m: scorer if m.group(1) else scorer.split("://", 1)[1], command)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=REPO_ROOT if check.in_checkout else tmp_path,
                          env=_env(), input=check.stdin, capture_output=True, text=True, timeout=check.timeout_s)
    where = f"{command!r} in the {ENV_NAME} environment"
    _no_traceback(proc, where)
    assert proc.returncode == check.returncode, f"{where} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    if check.one_line:
        assert len(proc.stderr.strip().splitlines()) == 1, f"{where}: not one line on stderr:\n{proc.stderr}"
    assert check.says in proc.stdout + proc.stderr, f"{where} does not say {check.says!r}:\n{proc.stdout}{proc.stderr}"


def test_the_readme_server_scores_the_example_clip_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    """The README's first line (``audio-reward serve``) in the server environment: it scores the shipped clip
    with the README's ``score`` line, and Ctrl-C stops it with exit 0 and at most 3 lines on stderr."""
    if "server" not in BY_NAME[ENV_NAME].extras:
        pytest.skip(f"the {ENV_NAME} environment has no server")
    port = free_port()
    proc = subprocess.Popen([str(ENV_BIN / "audio-reward"), "serve", "--port", str(port)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_ready(f"http://127.0.0.1:{port}", 180, proc=proc)
        make_fixture("examples", tmp_path, None, ENV_BIN)
        scored = subprocess.run(
            [str(ENV_BIN / "audio-reward"), "score", "--url", f"http://127.0.0.1:{port}", "--json",
             "--text", (tmp_path / "examples" / "speech.txt").read_text().strip(), "examples/speech.wav"],
            cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
        _no_traceback(scored, "audio-reward score")
        assert scored.returncode == 0, scored.stderr
        assert json.loads(scored.stdout)["score"] > 0.9, scored.stdout
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err
    assert proc.returncode == 0, f"Ctrl-C: exit {proc.returncode}\n{err}"
    assert len(err.strip().splitlines()) <= 3, f"Ctrl-C printed {len(err.splitlines())} lines:\n{err}"
    assert len(out.strip().splitlines()) <= 2, f"start-up is not quiet:\n{out}"


@pytest.mark.parametrize("key", [k for k, e in ENTRIES.items() if isinstance(e, Run) and e.env == ENV_NAME])
def test_doc_block(key: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    entry, block = ENTRIES[key], DOC_BLOCKS[key]
    assert isinstance(entry, Run)
    scorer = request.getfixturevalue("url") if entry.scorer else None
    for name in entry.files:
        make_fixture(name, tmp_path, scorer, ENV_BIN)
    proc = run_block(block, tmp_path, bindir=ENV_BIN, url=scorer, timeout_s=entry.timeout_s)
    _no_traceback(proc, f"{block.doc}:{block.line}")
    assert proc.returncode == 0, f"{block.doc}:{block.line} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.strip(), f"{block.doc}:{block.line} printed nothing"


def test_every_documented_environment_has_checks() -> None:
    assert set(CHECKS) == set(BY_NAME)
