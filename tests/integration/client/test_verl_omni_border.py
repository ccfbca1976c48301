"""Border tests with verl-omni's own code, both ways.

- verl-omni's client (``verl_omni/utils/reward_score/audio_http_scorer_client.py``)
  scores on our real server, at ``/score`` and ``/v1/score``, takes our
  refusals as final, and gets the same scores from a server with the speaker
  and quality models loaded.
- Our client scores on verl-omni's reference scorer (``whisper_cer_scorer.py``
  of its Qwen3-TTS recipe), which has only ``POST /score``.

verl-omni is not on PyPI and does not install here, so its files are loaded
from a checkout the way its own tests load its client
(``importlib.util.spec_from_file_location``).  Set ``VERL_OMNI_SRC`` to the
checkout; each test is skipped, saying why, when the variable or its file is
missing.  Read and run for this suite: verl-project/verl-omni at 3d52255 (the
client) and b822bec (the recipe's scorer); neither file is on its main branch
at a1139ba.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from audio_reward.scorer_client import (
    AsyncScorerClient,
    RequestRejectedError,
    ScoreResult,
)
from audio_reward.trainer_plugin.verl_omni_score import close_cached_clients
from audio_reward.trainer_plugin.verl_omni_score import compute_score as our_compute_score
from tests.testkit.speech import synth_speech

CLIENT_FILE = "verl_omni/utils/reward_score/audio_http_scorer_client.py"
SCORER_FILE = "examples/grpo_trainer/qwen3_tts/whisper_cer_scorer.py"
TEXT = "The quick brown fox jumps over the lazy dog."


def _load(relative: str) -> ModuleType:
    root = os.environ.get("VERL_OMNI_SRC")
    if not root:
        pytest.skip("VERL_OMNI_SRC is not set: point it at a verl-omni checkout to run the border tests")
    path = Path(root) / relative
    if not path.is_file():
        pytest.skip(f"{path} does not exist in this verl-omni checkout")
    name = "verl_omni_" + path.stem + "_under_test"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def their_client() -> ModuleType:
    # Session scope, so a missing checkout skips before the shared server is started.
    return _load(CLIENT_FILE)


async def _close_session(module: ModuleType) -> None:
    session = getattr(module.compute_score, "_session", None)
    if session is not None and not session.closed:
        await session.close()
    for name in ("_session", "_session_loop"):
        if hasattr(module.compute_score, name):
            delattr(module.compute_score, name)


@pytest.mark.parametrize("path", ["/score", "/v1/score"])
async def test_their_client_scores_on_our_server(their_client: ModuleType, scorer_url: str, path: str) -> None:
    audio, rate = synth_speech(TEXT)
    try:
        out = await their_client.compute_score(
            (audio, rate), TEXT, {"id": "sample-1", "index": np.int64(3), "audio": audio}, "tts",
            server_url=scorer_url + path, max_retries=2, retry_backoff=0.0,
        )
    finally:
        await _close_session(their_client)
    assert out["score"] > 0.8 and out["cer"] < 0.2  # their client checked every value is a finite scalar
    assert (
        out["protocol_version"] == "1" and out["normalized_reference"] == "the quick brown fox jumps over the lazy dog"
    )


async def test_their_client_scores_on_a_signals_server_as_on_one_without(their_client: ModuleType, scorer_url: str,
                                                                         signals_url: str) -> None:
    # A server with --speaker-model resemblyzer --quality-model dnsmos; their request names no reference and
    # weighs nothing more than the CER, so the answer is the one a server without the models gives.
    audio, rate = synth_speech(TEXT)
    extra_info = {"id": "sample-1", "index": np.int64(3), "audio": audio}
    try:
        plain, signals = [await their_client.compute_score(
            (audio, rate), TEXT, extra_info, "tts", server_url=url + "/score", max_retries=2, retry_backoff=0.0)
            for url in (scorer_url, signals_url)]
    finally:
        await _close_session(their_client)
    assert signals["score"] == plain["score"] and signals["cer"] == plain["cer"]
    assert set(signals) == set(plain) and not {"speaker_similarity", "dnsmos_ovrl", "reward_asr"} & set(signals)


async def test_their_client_takes_our_refusals_as_final(their_client: ModuleType, scorer_url: str) -> None:
    audio, _ = synth_speech(TEXT)
    try:
        with pytest.raises(RuntimeError, match=r"HTTP 400.*invalid_sample_rate"):
            await their_client.compute_score((audio, 999), TEXT, server_url=scorer_url + "/score", max_retries=2)
        with pytest.raises(RuntimeError, match=r"HTTP 400.*prompt_too_long"):
            await their_client.compute_score((audio, 16_000), "x" * 20_000, server_url=scorer_url + "/score")
        with pytest.raises(RuntimeError, match=r"HTTP 404.*did you mean /score"):
            await their_client.compute_score((audio, 16_000), TEXT, server_url=scorer_url + "/score/")
    finally:
        await _close_session(their_client)


@pytest.fixture
def reference_scorer() -> Iterator[tuple[str, dict[str, Any]]]:
    """verl-omni's reference scorer on loopback; its HTTP layer, validation and CER are its own.

    Its ``transcribe`` loads a transformers Whisper through torchaudio, which has
    no wheel for this torch: as verl-omni's own tests do, the instance is made
    without its model and ``transcribe`` answers a fixed transcript.
    """
    module = _load(SCORER_FILE)
    seen: dict[str, Any] = {"calls": 0}
    scorer = object.__new__(module.WhisperCERScorer)

    def transcribe(waveform: np.ndarray, sample_rate: int) -> str:
        seen["calls"] += 1
        seen["sample_rate"] = sample_rate
        return "the quick brown fox jumps over the lazy cat"

    scorer.transcribe = transcribe
    server = module.WhisperCERHTTPServer(("127.0.0.1", 0), scorer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def test_our_client_scores_on_their_reference_scorer(reference_scorer: tuple[str, dict[str, Any]]) -> None:
    url, seen = reference_scorer
    audio, rate = synth_speech(TEXT)
    expected_cer = 3 / len("the quick brown fox jumps over the lazy dog")
    async with AsyncScorerClient(url + "/score", backoff=0.0, timeout=30) as client:
        one = await client.score(audio, rate, TEXT, metadata={"id": "s-1"})
        many = await client.score_many([(audio, rate, TEXT)] * 5, chunk_size=2)
        with pytest.raises(RequestRejectedError) as info:
            await client.score(audio, rate, "  ")
    assert one.score == pytest.approx(1 - expected_cer) and one.diagnostics["sample_id"] == "s-1"
    assert one.diagnostics["asr_text"] == "the quick brown fox jumps over the lazy cat"
    assert [r.score for r in many if isinstance(r, ScoreResult)] == [one.score] * 5  # /v1/info 404: one by one
    assert info.value.status == 400 and "non-empty prompt" in info.value.message
    assert seen["calls"] == 6 and seen["sample_rate"] == rate
    out = await our_compute_score((audio, rate), TEXT, {"id": "s-2", "audio": audio}, server_url=url + "/score")
    await close_cached_clients()
    assert out["score"] == pytest.approx(1 - expected_cer) and out["sample_id"] == "s-2"
