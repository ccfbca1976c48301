"""The client against the real ``audio-reward serve`` (Whisper tiny.en) on loopback, with real speech."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audio_reward.cli import main
from audio_reward.scorer_client import (
    AsyncScorerClient,
    AudioTooLongError,
    InvalidInputError,
    RequestRejectedError,
    ScoreItem,
    ScorerClient,
    ScoreResult,
)
from audio_reward.scorer_client.eval.evaluate import load_rows
from audio_reward.trainer_plugin.verl_omni_score import close_cached_clients, compute_score
from tests.testkit.probes import read_metrics
from tests.testkit.server import running_server
from tests.testkit.speech import synth_speech

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "A rainbow is a division of white light into many beautiful colors.",
    "She sells sea shells by the sea shore.",
]


async def test_scores_real_speech(scorer_url: str) -> None:
    wav, rate = synth_speech(SENTENCES[0])
    async with AsyncScorerClient(scorer_url) as client:
        good = await client.score(wav, rate, SENTENCES[0], language="en", request_id="fox")
        wrong = await client.score(wav, rate, "Completely different words here.")
        assert (await client.info())["protocol_version"] == "1"
        assert await client.ready()
    assert good.request_id == "fox" and good.diagnostics["request_id"] == "fox"
    assert good.score > 0.9 and good.diagnostics["cer"] < 0.1
    assert "fox" in str(good.diagnostics["transcript"]).lower()
    assert wrong.score < 0.5 and wrong.diagnostics["cer"] > 0.5


EXAMPLE = Path(__file__).resolve().parents[3] / "examples"


def test_both_clients_score_a_file_as_the_score_command_does(scorer_url: str) -> None:
    """Issue 40, finding 3: the Python client scores a file on disk, as ``audio-reward score`` does."""
    text = (EXAMPLE / "speech.txt").read_text().strip()

    async def from_async() -> ScoreResult:
        async with AsyncScorerClient(scorer_url) as client:
            return await client.score_file(EXAMPLE / "speech.wav", text, request_id="file-async")

    by_async = asyncio.run(from_async())
    with ScorerClient(scorer_url) as client:
        by_sync = client.score_file(str(EXAMPLE / "speech.wav"), text, request_id="file-sync")
        with pytest.raises(InvalidInputError, match=r"missing\.wav does not exist"):
            client.score_file(EXAMPLE / "missing.wav", text)
        with pytest.raises(InvalidInputError, match=r"score_file\(path, text\)"):
            client.score(str(EXAMPLE / "speech.wav"), 16000, text)
    assert by_async.score == by_sync.score > 0.9 and by_sync.request_id == "file-sync"
    assert by_async.diagnostics["transcript"] == by_sync.diagnostics["transcript"]


async def test_score_many_in_order_through_the_batch_endpoint(scorer_url: str) -> None:
    items = [ScoreItem(*synth_speech(text), text, request_id=f"s{i}") for i, text in enumerate(SENTENCES)]
    # The second half is paired with the wrong text: their scores must drop, in their positions.
    items += [ScoreItem(it.waveform, it.sample_rate, SENTENCES[(i + 1) % 4], request_id=f"x{i}")
              for i, it in enumerate(items)]
    async with AsyncScorerClient(scorer_url) as client:
        results = await client.score_many(items, chunk_size=3, concurrency=2)
    assert all(isinstance(r, ScoreResult) for r in results)
    assert [r.request_id for r in results] == [it.request_id for it in items]
    assert all(r.score > 0.8 for r in results[:4]), [r.score for r in results[:4]]
    assert all(r.score < 0.5 for r in results[4:]), [r.score for r in results[4:]]
    assert [r.diagnostics["normalized_reference"] for r in results[:4]] == [
        t.lower().replace(".", "").replace(",", "") for t in SENTENCES]


async def test_final_rejection_is_not_retried(scorer_url: str) -> None:
    wav, rate = synth_speech(SENTENCES[3])
    async with AsyncScorerClient(scorer_url, max_retries=3) as client:
        with pytest.raises(RequestRejectedError) as info:
            await client.score(wav, rate, SENTENCES[3], language="xx")
        assert info.value.status == 400 and info.value.code == "unsupported_language"
        results = await client.score_many([ScoreItem(wav, rate, SENTENCES[3], language="xx"),
                                           (wav, rate, SENTENCES[3])])
    assert isinstance(results[0], RequestRejectedError) and results[0].code == "unsupported_language"
    assert isinstance(results[1], ScoreResult) and results[1].score > 0.8


def _scoring_requests(url: str) -> float:
    return sum(v for k, v in read_metrics(url).items()
               if k.startswith("audio_reward_requests_total{") and 'endpoint="/v1/score' in k)


async def test_audio_over_the_servers_limit_is_refused_before_it_is_sent(scorer_url: str) -> None:
    # The limit comes from the server's /v1/info (60 s here); nothing over it is uploaded.
    wav, rate = synth_speech(SENTENCES[3])
    before = _scoring_requests(scorer_url)
    async with AsyncScorerClient(scorer_url, max_retries=3) as client:
        limit = (await client.info())["limits"]["max_audio_seconds"]
        with pytest.raises(AudioTooLongError) as info:
            await client.score(np.zeros(8000 * 61, np.float32), 8000, "too long")
        assert _scoring_requests(scorer_url) == before
        results = await client.score_many([(np.zeros(8000 * 61, np.float32), 8000, "too long"),
                                           (wav, rate, SENTENCES[3])])
    assert limit == 60 and info.value.limit_s == 60 and info.value.code == "audio_too_long"
    assert str(info.value).startswith("the audio is 61.0 s long; the scorer at ") and "at most 60 s" in str(info.value)
    assert isinstance(results[0], AudioTooLongError) and results[0].duration_s == 61.0
    assert isinstance(results[1], ScoreResult) and results[1].score > 0.8
    with ScorerClient(scorer_url) as sync, pytest.raises(AudioTooLongError):
        sync.score(np.zeros(16000 * 120, np.float32), 16000, "two minutes")


def test_score_command_refuses_a_half_hour_file_in_seconds_without_uploading(scorer_url: str, tmp_path: Path) -> None:
    long_wav = tmp_path / "long.wav"
    sf.write(long_wav, np.zeros(16000 * 1800, np.int16), 16000, subtype="PCM_16")  # 30 minutes
    before = _scoring_requests(scorer_url)
    done = subprocess.run([sys.executable, "-m", "audio_reward.cli", "score", "--json", "--text", "hi", "--url",
                           scorer_url, str(long_wav)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    row = json.loads(done.stdout)
    assert row["file"] == str(long_wav) and row["error"]["type"] == "AudioTooLongError"
    message = row["error"]["message"]
    assert message.startswith("the audio is 1800.0 s long") and "at most 60 s" in message
    assert "bytes" not in message and "waveform_f32_base64" not in message
    assert _scoring_requests(scorer_url) == before


async def test_compute_score_on_the_real_server(scorer_url: str) -> None:
    wav, rate = synth_speech(SENTENCES[2])
    torch = pytest.importorskip("torch")
    out = await compute_score(
        solution_audio=(torch.from_numpy(wav), rate), ground_truth=SENTENCES[2],
        extra_info={"uid": "abc", "index": np.int64(3), "audio": wav}, data_source="tts",
        server_url=scorer_url + "/score",
    )
    await close_cached_clients()
    assert out["score"] > 0.8 and isinstance(out["cer"], float)
    assert all(not isinstance(v, (dict, list)) for v in out.values())


def test_sync_client_from_threads(scorer_url: str) -> None:
    wav, rate = synth_speech(SENTENCES[1])
    scores: list[float] = []
    with ScorerClient(scorer_url) as client:
        def work() -> None:
            scores.append(client.score(wav, rate, SENTENCES[1]).score)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert len(scores) == 4 and min(scores) > 0.8


def test_api_key_is_sent_and_a_wrong_one_is_final() -> None:
    wav, rate = synth_speech(SENTENCES[3])
    with running_server(model="tiny.en", env={"AUDIO_REWARD_API_KEY": "k-123"}) as server:
        with ScorerClient(server.url, api_key="k-123") as client:
            assert client.score(wav, rate, SENTENCES[3]).score > 0.8
        with ScorerClient(server.url, api_key="wrong", max_retries=3) as client, \
                pytest.raises(RequestRejectedError) as info:
            client.score(wav, rate, SENTENCES[3])
    assert info.value.status == 401


def test_eval_report_and_resume(scorer_url: str, tmp_path: Path) -> None:
    (tmp_path / "audio").mkdir()
    rows = []
    for i, text in enumerate(SENTENCES):
        wav, rate = synth_speech(text)
        sf.write(tmp_path / "audio" / f"{i}.flac" if i % 2 else tmp_path / "audio" / f"{i}.wav", wav, rate)
        rows.append({"audio": f"audio/{i}.flac" if i % 2 else f"audio/{i}.wav", "text": text, "id": f"utt{i}",
                     "language": "en"})
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    args = ["eval", str(manifest), "--out", str(out), "--url", scorer_url, "--no-progress"]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scored"] == 4 and summary["failed"] == 0
    assert summary["cer_percent"] < 5 and summary["wer_percent"] < 25  # "sea shore" may come back as one word
    assert summary["score"]["p10"] > 0.8
    assert sorted(summary["plots"]) == ["cer_by_duration.png", "cer_histogram.png", "report.html",
                                        "score_vs_duration.png"]
    for png in (p for p in summary["plots"] if p.endswith(".png")):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    # FLAC and WAV audio both play in the report.
    page = (out / "report.html").read_text()
    assert "data:audio/flac;base64," in page and "data:audio/wav;base64," in page
    # An interrupted run: only two rows made it to disk, the second torn mid-line.
    lines = (out / "utterances.jsonl").read_text().splitlines(keepends=True)
    (out / "utterances.jsonl").write_text(lines[0] + lines[1][:20])
    assert main(args) == 0
    after = (out / "utterances.jsonl").read_text().splitlines()
    assert len(after) == 4  # one kept, three scored now: none twice
    assert sorted(load_rows(out / "utterances.jsonl")) == ["utt0", "utt1", "utt2", "utt3"]
    assert json.loads((out / "summary.json").read_text())["scored"] == 4
    # A finished run has nothing left to send.
    assert main(args) == 0
    assert len((out / "utterances.jsonl").read_text().splitlines()) == 4


def test_many_loops_many_calls(scorer_url: str) -> None:
    wav, rate = synth_speech(SENTENCES[0])

    async def burst() -> list[dict]:
        try:
            return await asyncio.gather(*[
                compute_score((wav, rate), SENTENCES[0], server_url=scorer_url) for _ in range(6)])
        finally:
            await close_cached_clients()

    for _ in range(2):
        assert all(r["score"] > 0.9 for r in asyncio.run(burst()))
