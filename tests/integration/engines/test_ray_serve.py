"""Ray Serve scale-out on CPU: ``audio-reward serve --ray`` with two local tiny.en replicas behind one URL."""

from __future__ import annotations

import concurrent.futures
import http.client
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("ray")
pytest.importorskip("ray.serve")

from audio_reward.protocol import encode_f32
from audio_reward.scorer_server.ray_serve import REPLICA_HEADER, ScaleOutConfig
from tests.testkit.server import ServerHandle, running_server
from tests.testkit.speech import synth_speech

TEXT = "The quick brown fox jumps over the lazy dog."
OTHER = "Seven purple elephants were painting the kitchen on a rainy Tuesday."


KEEP_ALIVE_S = 2


@pytest.fixture(scope="module")
def ray_scorer() -> Iterator[ServerHandle]:
    """The real command line in a subprocess; SIGTERM at the end shuts the deployment and Ray down.

    ``max_header_bytes`` is one of the limits Ray Serve's proxy cannot apply; the keep-alive timeout
    is one it takes from the settings (its own default is 90 s)."""
    with running_server(
        ray=True, model="tiny.en", cpu_threads=1, max_wait_ms=5.0,
        min_replicas=2, max_replicas=2, gpus_per_replica=0, cpus_per_replica=0.5, max_ongoing_requests=8,
        keep_alive_timeout_s=KEEP_ALIVE_S, max_header_bytes=16384,
        env={"RAY_ADDRESS": ""}, ready_timeout_s=300,
    ) as server:
        yield server


@pytest.fixture(scope="module")
def ray_scorer_url(ray_scorer: ServerHandle) -> str:
    return ray_scorer.url


def _body(text: str, prompt: str) -> dict[str, object]:
    audio, rate = synth_speech(text)
    return {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio), "num_samples": len(audio),
            "sample_rate": rate, "prompt": prompt}


def test_requests_reach_both_replicas_and_score_correctly(ray_scorer_url: str) -> None:
    good, bad = _body(TEXT, TEXT), _body(TEXT, OTHER)

    def post(i: int) -> httpx.Response:
        return httpx.post(f"{ray_scorer_url}/v1/score", json=good if i % 2 == 0 else bad, timeout=120)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(post, range(24)))
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses if r.status_code != 200]
    replicas = {r.headers[REPLICA_HEADER] for r in responses}
    assert len(replicas) == 2
    for i, r in enumerate(responses):
        score = r.json()["score"]
        assert score >= 0.9 if i % 2 == 0 else score <= 0.4


def test_every_endpoint_is_served_through_the_proxy(ray_scorer_url: str) -> None:
    info = httpx.get(f"{ray_scorer_url}/v1/info", timeout=30)
    assert info.status_code == 200 and info.json()["engine"]["model_id"] == "tiny.en"
    assert httpx.get(f"{ray_scorer_url}/readyz", timeout=30).status_code == 200
    batch = {"protocol_version": "1", "items": [_body(TEXT, TEXT), _body(OTHER, OTHER)]}
    results = httpx.post(f"{ray_scorer_url}/v1/score/batch", json=batch, timeout=120).json()["results"]
    assert [r["score"] >= 0.9 for r in results] == [True, True]
    missing = httpx.get(f"{ray_scorer_url}/nope", timeout=30)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_the_proxy_closes_idle_connections_after_the_settings_keep_alive(ray_scorer_url: str) -> None:
    host, port = ray_scorer_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/healthz")
    assert conn.getresponse().read() and conn.sock is not None
    sock = conn.sock
    sock.settimeout(KEEP_ALIVE_S + 8)
    t0 = time.monotonic()
    try:
        assert sock.recv(1) == b""  # the proxy closed the idle connection
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the idle connection was still open after {KEEP_ALIVE_S + 8} s")
    finally:
        conn.close()
    assert KEEP_ALIVE_S - 0.5 < time.monotonic() - t0 < KEEP_ALIVE_S + 8


def test_limits_the_proxy_cannot_apply_are_named_at_start_up(ray_scorer: ServerHandle) -> None:
    log = ray_scorer.log_tail(200_000)
    line = next((ln for ln in log.splitlines() if "not applied under Ray Serve" in ln), "")
    assert "max_header_bytes" in line, log[-3000:]
    assert "header_timeout_s" not in line and "max_connections" not in line  # left at their defaults


def test_scale_config_maps_to_ray_options() -> None:
    opts = ScaleOutConfig(min_replicas=1, max_replicas=4, target_ongoing_requests=16).deployment_options()
    assert opts["autoscaling_config"]["target_ongoing_requests"] == 16
    assert opts["autoscaling_config"]["max_replicas"] == 4 and opts["ray_actor_options"]["num_gpus"] == 1.0
    fixed = ScaleOutConfig(min_replicas=2, max_replicas=2, gpus_per_replica=0).deployment_options()
    assert fixed["num_replicas"] == 2 and "num_gpus" not in fixed["ray_actor_options"]
    with pytest.raises(ValueError):
        ScaleOutConfig(min_replicas=3, max_replicas=2).deployment_options()


def test_replicas_run_the_drivers_settings_not_their_nodes_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from audio_reward.scorer_server.ray_serve import ScorerReplica, shipped
    from audio_reward.scorer_server.settings import ServerSettings

    monkeypatch.setenv("AUDIO_REWARD_SERVER_HOST", "0.0.0.0")
    monkeypatch.setenv("AUDIO_REWARD_SERVER_PORT", "9123")
    driver = ServerSettings(max_queue=7, reward={"formula": "exp"})
    assert (driver.host, driver.port) == ("0.0.0.0", 9123)  # host and port from the environment are honoured
    monkeypatch.setenv("AUDIO_REWARD_SERVER_MAX_QUEUE", "99")  # what a replica's node would say
    replica = ScorerReplica(shipped(driver))
    assert replica.settings.max_queue == 7 and replica.settings.port == 9123
    assert replica.settings.reward.formula == "exp"
    # A replica tells what the operator chose from a default (the batching note is a warning only then).
    assert {"max_queue", "reward"} <= replica.settings.model_fields_set
    assert "max_batch_size" not in replica.settings.model_fields_set


def test_a_key_read_from_a_file_on_the_driver_reaches_the_replicas(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from audio_reward.scorer_server.ray_serve import ScorerReplica, shipped
    from audio_reward.scorer_server.settings import ServerSettings

    monkeypatch.delenv("AUDIO_REWARD_API_KEY", raising=False)
    key_file = tmp_path / "key"
    key_file.write_text("file-key\n")
    replica = ScorerReplica(shipped(ServerSettings(api_key_file=key_file)))
    assert replica.settings.api_key is not None and replica.settings.api_key.get_secret_value() == "file-key"
    assert replica.settings.api_key_file is None


def test_bad_scale_out_flags_get_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from audio_reward.scorer_server.ray_serve import main

    assert main(["--min-replicas", "3", "--max-replicas", "2"]) == 2
    assert capsys.readouterr().err == ("audio-reward ray serve: invalid scale-out settings: "
                                       "need 0 < min_replicas <= max_replicas\n")
    assert main(["--gpus-per-replica", "-1"]) == 2
    assert "gpus_per_replica: Input should be greater than or equal to 0" in capsys.readouterr().err


def test_scale_out_flags_are_generated_from_the_config() -> None:
    import argparse

    from audio_reward.scorer_server.scale_out import (
        add_scale_out_flags,
        scale_out_from_args,
    )

    parser = argparse.ArgumentParser()
    add_scale_out_flags(parser)
    scale = scale_out_from_args(parser.parse_args(["--min-replicas", "2", "--max-replicas", "3",
                                                   "--gpus-per-replica", "0", "--address", "auto"]))
    assert (scale.min_replicas, scale.max_replicas, scale.gpus_per_replica, scale.address) == (2, 3, 0.0, "auto")
    assert scale_out_from_args(parser.parse_args([])) == ScaleOutConfig()
