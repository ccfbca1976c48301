"""``audio-reward serve --config FILE`` on a real server (issue 40, finding 8): the file's settings are served,
flags and variables win over it, and ``-v`` says where each setting came from."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.testkit.server import running_server

SERVE_TOML = """\
# serve.toml: the flags' names as keys
max-batch-size = 8
max-queue = 64
request-timeout-s = 30.0
normalizer = "seed-tts-eval"

[reward]
formula = "exp"
exp-k = 3.0
"""

SERVE_YAML = """\
max_batch_size: 8
max_queue: 64
request_timeout_s: 30.0
normalizer: seed-tts-eval
reward:
  formula: exp
  exp_k: 3.0
"""


@pytest.mark.parametrize(("name", "text"), [("serve.toml", SERVE_TOML), ("serve.yaml", SERVE_YAML)])
def test_serve_runs_with_the_file_under_variables_and_flags(tmp_path, name: str, text: str) -> None:
    config = tmp_path / name
    config.write_text(text)
    env = {"AUDIO_REWARD_SERVER_MAX_QUEUE": "32"}
    with running_server(instant=True, config=config, verbose=True, max_wait_ms=2, env=env,
                        request_timeout_s=20) as server:
        info = httpx.get(f"{server.url}/v1/info", timeout=10).json()
        log = server.log_tail(100_000)
    lines = dict(re.findall(r"^audio-reward serve: ([\w.]+) = .*?  \((.+)\)$", log, re.MULTILINE))
    assert lines["max_batch_size"] == f"config {config}" and lines["reward.exp_k"] == f"config {config}"
    assert lines["max_queue"] == "env AUDIO_REWARD_SERVER_MAX_QUEUE"
    assert lines["request_timeout_s"] == "flag --request-timeout-s"
    assert lines["normalizer"] == f"config {config}" and lines["model"] == "default"
    assert re.search(r"^audio-reward serve: max_queue = 32  \(env", log, re.MULTILINE)
    assert info["reward"]["formula"] == "exp" and info["reward"]["exp_k"] == 3.0
    assert info["normalizer"] == "seed-tts-eval"
    assert (info["limits"]["max_queue"], info["limits"]["request_timeout_s"]) == (32, 20)
    assert info["batching"]["max_batch_size_setting"] == 8


def test_serve_refuses_a_file_it_cannot_use_in_one_line(tmp_path) -> None:
    import subprocess
    import sys

    config = tmp_path / "serve.toml"
    config.write_text("max-batchsize = 8\n")
    done = subprocess.run([sys.executable, "-m", "audio_reward.cli", "serve", "--config", str(config)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"audio-reward serve: invalid settings: --config {config}: unknown setting 'max-batchsize' "
        "(did you mean max_batch_size?)"], done.stderr
