"""The thread-safe sync client and verl-omni's compute_score signature, on a real loopback server."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audio_reward.scorer_client import (
    AsyncScorerClient,
    ClientSettings,
    InvalidInputError,
    RequestRejectedError,
    ScorerClient,
    ScorerUnavailableError,
    sanitize_metadata,
)
from audio_reward.trainer_plugin import verl_omni_score as compute_module
from audio_reward.trainer_plugin.verl_omni_score import close_cached_clients, compute_score
from tests.testkit.fault_server import (
    FaultServer,
    Seen,
    Status,
    always_score,
    expected_score,
)
from tests.testkit.server import REPO_ROOT
from tests.testkit.speech import synth_speech


def test_sync_client_shared_by_threads(fault_server: FaultServer, tone: np.ndarray) -> None:
    flaky = threading.Lock()
    fails = {"left": 20}

    def policy(seen: Seen):
        with flaky:
            if fails["left"] > 0:
                fails["left"] -= 1
                return Status(503, retry_after="0")
        return always_score(seen)

    fault_server.policy = policy
    with ScorerClient(fault_server.url, max_retries=8, backoff=0.001, backoff_max=0.01) as client:
        def work(worker: int) -> list[str]:
            out = [client.score(tone, 16000, "x", request_id=f"w{worker}-{i}").request_id for i in range(10)]
            many = client.score_many([(tone, 16000, "y")] * 5, chunk_size=2)
            return out + [r.request_id for r in many]

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            ids = [rid for part in pool.map(work, range(8)) for rid in part]
        thread = client._thread
        assert client.info()["model"] == "fault"
        assert client.ready()
    assert not thread.is_alive()
    assert len(ids) == len(set(ids)) == 120
    assert set(fault_server.scored) == set(ids) and set(fault_server.scored.values()) == {1}
    with pytest.raises(RuntimeError, match="closed"):
        client.score(tone, 16000, "x")
    client.close()  # idempotent


def test_sync_client_raises_typed_errors(fault_server: FaultServer, tone: np.ndarray) -> None:
    fault_server.policy = lambda seen: Status(422, code="invalid_sample_rate", retryable=False)
    with ScorerClient(fault_server.url) as client:
        with pytest.raises(RequestRejectedError, match="invalid_sample_rate"):
            client.score(tone, 16000, "x")
        with pytest.raises(InvalidInputError):
            client.score([], 16000, "x")


def test_sync_client_stops_its_thread_when_dropped(fault_server: FaultServer, tone: np.ndarray) -> None:
    client = ScorerClient(fault_server.url)
    client.score(tone, 16000, "x")
    thread = client._thread
    del client
    import gc

    gc.collect()
    thread.join(5)
    assert not thread.is_alive()


async def test_compute_score_matches_verl_omni_contract(fault_server: FaultServer, tone: np.ndarray) -> None:
    extra_info = {
        "id": "sample-1", "seed": np.array(7), "step": np.int64(3), "lr": np.float32(0.5), "ok": True,
        "nan": float("nan"), "audio": tone, "audio_sample_rate": 16000, "list": [1, 2], "nested": {"a": 1},
        "language": "en",
    }
    result = await compute_score(
        solution_audio=(tone, 16000), ground_truth="target text", extra_info=extra_info, data_source="tts",
        server_url=fault_server.url + "/score", max_retries=1, retry_backoff=0.0,
    )
    rid = result["request_id"]
    assert result["score"] == expected_score(rid)
    assert set(result) == {"score", "cer", "transcript", "request_id", "protocol_version"}
    # The audio came from solution_audio; extra_info's own audio is not sent again.
    result2 = await compute_score(None, "from extra_info", extra_info, server_url=fault_server.url)
    assert result2["score"] == expected_score(result2["request_id"])
    # One cached client (one session) per loop and setting, however many calls.
    await asyncio.gather(*[
        compute_score((tone, 16000), "t", server_url=fault_server.url + "/score", max_retries=1, retry_backoff=0.0)
        for _ in range(50)
    ])
    loop = asyncio.get_running_loop()
    mine = compute_module.CLIENT_CACHE.clients(loop)
    assert len(mine) == 2
    await close_cached_clients()
    assert all(c.closed for c in mine)
    assert not compute_module.CLIENT_CACHE.clients(loop)


async def test_compute_score_errors(fault_server: FaultServer, tone: np.ndarray) -> None:
    with pytest.raises(InvalidInputError, match="solution_audio"):
        await compute_score(None, "t", server_url=fault_server.url)
    with pytest.raises(ValueError, match="finite number"):
        await compute_score((tone, 16000), "t", server_url=fault_server.url, timeout=float("nan"))
    with pytest.raises(ValueError, match="integer"):
        await compute_score((tone, 16000), "t", server_url=fault_server.url, max_retries=1.5)
    with pytest.raises(TypeError, match="unexpected keyword"):
        await compute_score((tone, 16000), "t", server_url=fault_server.url, timeout_s=1.0)
    fault_server.policy = lambda seen: Status(503, retry_after="0")
    with pytest.raises(ScorerUnavailableError) as info:
        await compute_score((tone, 16000), "t", server_url=fault_server.url, max_retries=2, retry_backoff=0.0)
    assert info.value.attempts == 3
    await close_cached_clients()


def test_compute_score_across_asyncio_run_calls(fault_server: FaultServer, tone: np.ndarray) -> None:
    # Each asyncio.run is a new loop: a new client, and the ended loop's client is forgotten.
    for _ in range(3):
        out = asyncio.run(compute_score((tone, 16000), "t", server_url=fault_server.url))
        assert out["score"] == expected_score(out["request_id"])
    assert compute_module.CLIENT_CACHE.held() == 0


def test_sanitize_metadata_rule() -> None:
    torch = pytest.importorskip("torch")
    out = sanitize_metadata({
        "s": "x", "i": 3, "b": False, "n": None, "f": 0.25, "inf": float("inf"), "np0d": np.array(2.5),
        "npint": np.int32(4), "t1": torch.tensor([1.5]), "tvec": torch.tensor([1.0, 2.0]), "arr": np.zeros(3),
        "lst": [1], "d": {}, 5: "int-key", "tnan": torch.tensor(float("nan")),
    })
    assert out == {"s": "x", "i": 3, "b": False, "n": None, "f": 0.25, "np0d": 2.5, "npint": 4, "t1": 1.5,
                   "5": "int-key"}


def _set_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name in [k for k in os.environ if k.startswith("AUDIO_REWARD_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def test_settings_from_env_and_url_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"AUDIO_REWARD_URL": "http://a:1/score, http://b:2/v1/score/", "AUDIO_REWARD_CLIENT_MAX_RETRIES": "7",
           "AUDIO_REWARD_CLIENT_TIMEOUT": "3.5", "AUDIO_REWARD_API_KEY": "k"}
    _set_env(monkeypatch, env)
    s = ClientSettings(deadline=9.0)
    assert s.urls == ("http://a:1/score", "http://b:2/v1/score") and s.max_retries == 7 and s.timeout == 3.5 \
        and s.deadline == 9.0
    assert "api_key = **********" in s.describe() and "k\n" not in s.describe()
    assert ClientSettings("http://h/prefix/").urls == ("http://h/prefix",)
    assert ClientSettings("localhost:8000").urls == ("http://localhost:8000",)  # no scheme: http
    for bad in ("ftp://x", "http://h/score?x=1", ""):
        with pytest.raises(ValueError):
            ClientSettings(bad)
    _set_env(monkeypatch, {**env, "AUDIO_REWARD_CLIENT_MAX_RETRIES": "-1"})
    with pytest.raises(ValueError, match="max_retries"):
        ClientSettings()
    _set_env(monkeypatch, {})
    with pytest.raises(ValueError, match="no scorer URL"):
        ClientSettings()
    with pytest.raises(ValueError, match="either settings"):
        AsyncScorerClient("http://a", settings=s)


def test_settings_own_prefix_wins_and_server_variables_are_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_env(monkeypatch, {"AUDIO_REWARD_URL": "http://shared:1", "AUDIO_REWARD_CLIENT_URLS": "http://mine:2",
                           "AUDIO_REWARD_CLIENT_API_KEY": "client-key", "AUDIO_REWARD_API_KEY": "shared-key",
                           "AUDIO_REWARD_TIMEOUT": "1", "AUDIO_REWARD_SERVER_TIMEOUT": "1"})
    s = ClientSettings(max_retries=0)
    assert s.urls == ("http://mine:2",) and s.api_key == "client-key"
    assert s.timeout == 120.0 and s.max_retries == 0
    # Arguments win over the environment.
    assert ClientSettings("http://arg:3", api_key="arg-key").api_key == "arg-key"


def test_compute_score_example_of_the_docs_runs_and_closes_its_connections(scorer_url: str, tmp_path: Path) -> None:
    """docs/client.md's compute_score example, run as a script: a score, and no unclosed session at exit."""
    doc = (REPO_ROOT / "docs" / "client.md").read_text(encoding="utf-8")
    (example,) = [b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.S) if "compute_score(" in b]
    assert "http://scorer:8000/score" in example
    (tmp_path / "example.py").write_text(example.replace("http://scorer:8000", scorer_url))
    audio, rate = synth_speech("Hello world.")
    sf.write(tmp_path / "hello.wav", audio, rate)
    proc = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    score, cer, *transcript = proc.stdout.split()
    assert 0.0 <= float(score) <= 1.0 and float(cer) >= 0.0 and "hello" in " ".join(transcript).lower()
    assert "Unclosed" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


async def test_cached_clients_close_when_their_loop_shuts_down(fault_server: FaultServer, tone: np.ndarray) -> None:
    clients: list[AsyncScorerClient] = []

    async def score_once() -> None:
        await compute_score((tone, 16000), "t", server_url=fault_server.url)
        clients.extend(compute_module.CLIENT_CACHE.clients())

    # asyncio.run shuts its loop down with shutdown_asyncgens(): the cached client is closed then.
    await asyncio.to_thread(asyncio.run, score_once())
    assert len(clients) == 1 and clients[0].closed


def test_sync_client_registers_speakers_and_asks_for_quality(signals_url: str, tmp_path: Path) -> None:
    # The sync face of the speaker references and DNSMOS, on a real server with the signal models.
    reference, ref_rate = synth_speech("The reference speaker reads this sentence aloud.")
    path = tmp_path / "speaker.wav"
    sf.write(path, reference, ref_rate, subtype="FLOAT")  # the same samples as registered from memory
    speech, rate = synth_speech("Hello world.")
    with ScorerClient(signals_url) as client:
        reference_id = client.register_speaker(reference, ref_rate)
        assert client.register_speaker_file(path) == reference_id  # the same recording: the same id
        result = client.score(speech, rate, "Hello world.", speaker_reference_id=reference_id, measure_quality=True)
        assert not client.closed
    assert client.closed
    assert result.diagnostics["speaker_reference_id"] == reference_id
    assert -1.0 <= float(result.diagnostics["speaker_similarity"]) <= 1.0  # type: ignore[arg-type]
    assert 1.0 <= float(result.diagnostics["dnsmos_ovrl"]) <= 5.0  # type: ignore[arg-type]


FORGOTTEN = """
import gc, sys
import numpy as np
from audio_reward.scorer_client import ScorerClient

url, how = sys.argv[1], sys.argv[2]
client = ScorerClient(url)
print(client.score(np.zeros(1600, dtype=np.float32), 16000, "x").score)
if how == "dropped":
    del client
    gc.collect()
    print("collected")
"""


@pytest.mark.parametrize("how", ["dropped", "left_at_exit"])
def test_a_sync_client_never_closed_goes_quietly(fault_server: FaultServer, tmp_path: Path, how: str) -> None:
    """Issue 40, finding 4: a forgotten ScorerClient closes its connections when collected or at exit, without
    aiohttp's 'Unclosed client session' / 'Unclosed connector' on stderr (docs/client.md, Threads)."""
    (tmp_path / "forgotten.py").write_text(FORGOTTEN)
    proc = subprocess.run([sys.executable, "forgotten.py", fault_server.url, how], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-1] == ("collected" if how == "dropped" else proc.stdout.split()[0])
    assert proc.stderr == "", proc.stderr
