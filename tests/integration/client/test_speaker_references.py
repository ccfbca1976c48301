"""The client's speaker references against a real server: registered once, registered again after eviction.

The session's ``signals_url`` server keeps two references, so registering two more evicts the first;
a request naming it then gets 404 ``unknown_speaker_reference`` and the client, which still holds the
recording, registers it again and the request succeeds (single and batch).  With two servers as one client's
URLs, the server that never had a reference meets the same path on its first request naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
from pathlib import Path

import httpx
import pytest

from audio_reward.scorer_client import AsyncScorerClient, InvalidInputError, RequestRejectedError, ScoreItem
from tests.testkit.server import server_process, server_python, wait_ready
from tests.testkit.speech import SENTENCES, espeak_available, espeak_speech, synth_speech

pytestmark = pytest.mark.skipif(not espeak_available(), reason="espeak-ng is not installed")

VOICES = ("en-us+m2", "en-us+f1", "en-us+m6")


def test_an_evicted_reference_is_registered_again_and_the_request_succeeds(signals_url: str) -> None:
    speech, rate = synth_speech(SENTENCES[2])

    async def run() -> None:
        async with AsyncScorerClient(signals_url, max_retries=2, backoff=0.01) as client:
            references = [espeak_speech(SENTENCES[0], voice) for voice in VOICES]
            first = await client.register_speaker(*references[0])
            assert await client.register_speaker(*references[0]) == first  # cached: not sent again
            for audio, ref_rate in references[1:]:  # two more: the server evicts the first
                await client.register_speaker(audio, ref_rate)
            single = await client.score(speech, rate, SENTENCES[2], speaker_reference_id=first,
                                        reward={"speaker_weight": 0.2})
            assert single.diagnostics["speaker_reference_id"] == first
            assert -1.0 <= float(single.diagnostics["speaker_similarity"]) <= 1.0  # type: ignore[arg-type]
            # Another client registers two others on the same server: the first is evicted again.
            async with AsyncScorerClient(signals_url) as other:
                for voice in ("en-us+f3", "en-us+m4"):
                    await other.register_speaker(*espeak_speech(SENTENCES[1], voice))
            batch = await client.score_many([ScoreItem(speech, rate, SENTENCES[2], speaker_reference_id=first)] * 2,
                                            return_exceptions=False)
            assert [r.diagnostics["speaker_reference_id"] for r in batch] == [first, first]
            alone = single.diagnostics["speaker_similarity"]
            assert batch[0].diagnostics["speaker_similarity"] == pytest.approx(alone, abs=1e-6)  # batched or not

    asyncio.run(run())


def _counts(url: str, name: str) -> dict[str, float]:
    """The series of counter ``name`` on the server at ``url``'s /metrics, by their label text."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return {labels: float(value) for labels, value in re.findall(rf"^audio_reward_{name}_total{{(.*)}} (\S+)$",
                                                                   text, re.MULTILINE)}


def test_with_two_servers_the_one_without_the_reference_gets_it_once_and_every_item_succeeds() -> None:
    probe = subprocess.run([server_python(), "-c", "import resemblyzer"], capture_output=True, check=False)
    if probe.returncode:
        pytest.skip("the server's environment lacks the signals extra (resemblyzer)")
    speech, rate = synth_speech(SENTENCES[2])
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(server_process(model="tiny.en", max_wait_ms=5, speaker_model="resemblyzer"))
                   for _ in range(2)]
        for server in servers:  # both load at once
            wait_ready(server.url, 180, proc=server.proc, log_path=server.log_path)

        async def run() -> list[object]:
            # No retry to spend: an item scores only where the retry after a re-registration is free.
            async with AsyncScorerClient([s.url for s in servers], max_retries=0) as client:
                reference = await client.register_speaker(*espeak_speech(SENTENCES[0], "en-us+m2"))  # one server
                item = ScoreItem(speech, rate, SENTENCES[2], speaker_reference_id=reference)
                # One item per chunk, one chunk at a time: the calls alternate between the URLs.
                batched = await client.score_many([item] * 4, chunk_size=1, concurrency=1,
                                                 return_exceptions=False)
                singles = [await client.score(speech, rate, SENTENCES[2], speaker_reference_id=reference)
                           for _ in range(2)]
                assert all(r.diagnostics["speaker_reference_id"] == reference for r in [*batched, *singles])
                return [r.diagnostics["speaker_similarity"] for r in [*batched, *singles]]

        similarities = asyncio.run(run())
        assert similarities == pytest.approx([similarities[0]] * 6, abs=1e-6)  # the same model on both
        requests = [_counts(s.url, "requests") for s in servers]
        items = [_counts(s.url, "items") for s in servers]
    # The first registration went to one server, the re-registration to the other: one each.
    assert [r.get('endpoint="/v1/speakers",status="200"') for r in requests] == [1.0, 1.0]
    # One unknown_speaker_reference in all (the other server's first item), and each item scored once.
    assert sum(i.get('outcome="unknown_speaker_reference"', 0.0) for i in items) == 1.0
    # The six calls alternate between the URLs, and the retry went back to the server that answered: three
    # each (a retry sent on to the other URL would make it four and two).
    assert [i.get('outcome="ok"') for i in items] == [3.0, 3.0]


def test_an_id_this_client_never_registered_is_a_final_404(signals_url: str) -> None:
    speech, rate = synth_speech(SENTENCES[2])

    async def run() -> None:
        async with AsyncScorerClient(signals_url, max_retries=2, backoff=0.01) as client:
            with pytest.raises(RequestRejectedError) as raised:
                await client.score(speech, rate, SENTENCES[2], speaker_reference_id="f" * 64)
            assert raised.value.status == 404 and raised.value.code == "unknown_speaker_reference"

    asyncio.run(run())


def test_compute_score_registers_a_rows_reference_recording_once(signals_url: str, tmp_path: Path) -> None:
    import soundfile as sf

    from audio_reward.trainer_plugin.verl_omni_score import close_cached_clients, compute_score

    reference, ref_rate = espeak_speech(SENTENCES[3], "en-us+f4")
    path = tmp_path / "speaker.wav"
    sf.write(path, reference, ref_rate)
    same, rate = espeak_speech(SENTENCES[1], "en-us+f4")
    other, other_rate = synth_speech(SENTENCES[1])

    async def run() -> list[dict[str, object]]:
        try:
            info = {"speaker_reference_path": str(path)}
            return [await compute_score((audio, r), SENTENCES[1], info, server_url=signals_url)
                    for audio, r in ((same, rate), (other, other_rate))]
        finally:
            await close_cached_clients()

    same_r, other_r = asyncio.run(run())
    assert same_r["speaker_reference_id"] == other_r["speaker_reference_id"]
    assert float(same_r["speaker_similarity"]) > float(other_r["speaker_similarity"]) + 0.15  # type: ignore[arg-type]
    missing = {"speaker_reference_path": str(tmp_path / "absent.wav")}
    with pytest.raises(InvalidInputError, match=r"speaker reference: .*does not exist"):
        asyncio.run(compute_score((same, rate), SENTENCES[1], missing, server_url=signals_url))


def test_eval_reports_speaker_similarity_and_dnsmos_beside_the_cer(signals_url: str, tmp_path: Path) -> None:
    import json

    import soundfile as sf

    from audio_reward.scorer_client import ClientSettings
    from audio_reward.scorer_client.eval.evaluate import run_eval

    voice = "en-us+f4"
    sf.write(tmp_path / "ref.wav", *espeak_speech(SENTENCES[3], voice))
    rows = []
    for i, (audio, rate) in enumerate([espeak_speech(SENTENCES[0], voice), synth_speech(SENTENCES[0])]):
        sf.write(tmp_path / f"{i}.wav", audio, rate)
        rows.append({"id": f"u{i}", "audio": f"{i}.wav", "text": SENTENCES[0], "speaker_reference": "ref.wav"})
    rows.append({"id": "gone", "audio": "0.wav", "text": SENTENCES[0], "speaker_reference": "absent.wav"})
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = asyncio.run(run_eval(manifest, tmp_path / "out", ClientSettings(signals_url), plots=False))
    assert summary["scored"] == 2 and summary["failures"][0]["reason"] == "audio_not_found"
    signals = summary["signals"]
    assert signals["speaker_similarity"]["count"] == 2 and signals["dnsmos_ovrl"]["count"] == 2
    scored = {r["id"]: r for r in map(json.loads, (tmp_path / "out" / "utterances.jsonl").read_text().splitlines())}
    assert scored["u0"]["speaker_similarity"] > scored["u1"]["speaker_similarity"] + 0.15  # its own voice first
    assert "speaker_similarity mean / median" in (tmp_path / "out" / "summary.md").read_text()
