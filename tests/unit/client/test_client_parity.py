"""The sync client offers what the async client offers: every public method, every argument, the same types,
and the same requests on the wire.

``ScorerClient`` runs ``AsyncScorerClient`` on a loop thread; a method or an argument added to the async face
alone leaves threaded code without it, so this compares the two faces member by member (inherited members
included: both take their constructor from ``BaseScorerClient``), then calls each method on both faces over a
recording transport and compares what was sent and what came back. ``aclose`` is ``close`` on the sync face;
the context-manager dunders differ by design (``async with`` against ``with``).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson
import pytest

import audio_reward.scorer_client as client_package
from audio_reward.protocol import RewardOptions
from audio_reward.scorer_client import AsyncScorerClient, ScoreItem, ScorerClient
from audio_reward.scorer_client.transport import AsyncTransport, Request, Response

SYNC_NAME = {"aclose": "close"}
"""Async members whose sync counterpart has another name."""

ELSEWHERE = {"AsyncTransport": "audio_reward.scorer_client.transport"}
"""Signature types documented in a submodule, beside the types that go with them (a transport's Request,
Response and errors live in ``transport``)."""


def _public(cls: type) -> dict[str, Any]:
    """The public members of ``cls`` and its bases (but ``object``), as defined (not bound)."""
    return {name: inspect.getattr_static(cls, name) for name in dir(cls)
            if not name.startswith("_") and not hasattr(object, name)}


def _async_members() -> list[str]:
    return sorted([*_public(AsyncScorerClient), "__init__"])


def _signature(cls: type, name: str) -> inspect.Signature:
    return inspect.signature(getattr(cls, name))


@pytest.mark.parametrize("name", _async_members())
def test_the_sync_client_has_each_public_member_of_the_async_client(name: str) -> None:
    sync_name = SYNC_NAME.get(name, name)
    async_member = inspect.getattr_static(AsyncScorerClient, name)
    sync_member = inspect.getattr_static(ScorerClient, sync_name, None)
    assert sync_member is not None, f"ScorerClient lacks {sync_name} (AsyncScorerClient.{name})"
    if isinstance(async_member, property):
        assert isinstance(sync_member, property), f"ScorerClient.{sync_name} must be a property"
        return
    assert not inspect.iscoroutinefunction(sync_member), f"ScorerClient.{sync_name} must block, not be async"
    want = _signature(AsyncScorerClient, name)
    got = _signature(ScorerClient, sync_name)
    assert list(got.parameters) == list(want.parameters), (
        f"ScorerClient.{sync_name} takes {list(got.parameters)}, AsyncScorerClient.{name} {list(want.parameters)}")
    for param, expected in want.parameters.items():
        actual = got.parameters[param]
        assert (actual.kind, actual.default, actual.annotation) == \
            (expected.kind, expected.default, expected.annotation), f"{sync_name}({param}): {actual} != {expected}"
    assert got.return_annotation == want.return_annotation, f"{sync_name} returns {got.return_annotation}"


def test_the_sync_client_has_nothing_public_that_the_async_one_lacks() -> None:
    async_names = {SYNC_NAME.get(name, name) for name in _public(AsyncScorerClient)}
    assert set(_public(ScorerClient)) <= async_names | {"settings"}


@pytest.mark.parametrize("name", _async_members())
def test_every_type_in_a_client_signature_is_importable_from_the_client_package(name: str) -> None:
    member = inspect.getattr_static(AsyncScorerClient, name)
    if isinstance(member, property):
        return
    hints = inspect.get_annotations(member, eval_str=False)
    named = {word for hint in hints.values() for word in str(hint).replace("|", " ").replace("[", " ")
             .replace("]", " ").replace(",", " ").split() if word[:1].isupper()}
    # Standard-library and typing names (Any, Mapping, Iterable, Sequence, Path, Unpack) come from the standard library.
    named -= {"Any", "Mapping", "Iterable", "Sequence", "Path", "None", "Unpack", *ELSEWHERE}
    missing = sorted(n for n in named if not hasattr(client_package, n))
    assert not missing, f"AsyncScorerClient.{name} names {missing}, not importable from audio_reward.scorer_client"


# ---------------------------------------------------------------- the same requests on the wire

URL = "http://scorer.test:8000"
REFERENCE = "ab" * 32


class RecordingTransport(AsyncTransport):
    """Answers every endpoint as this package's server would, and records each request."""

    def __init__(self) -> None:
        self.requests: list[Request] = []

    async def handle_async_request(self, request: Request) -> Response:
        self.requests.append(request)
        path = request.url.removeprefix(URL)
        if path == "/v1/info":
            return Response(200, orjson.dumps({"protocol_version": "1", "endpoints": ["/v1/score", "/v1/score/batch"],
                                               "limits": {"max_audio_seconds": 60}}))
        if path == "/readyz":
            return Response(200, b"{}")
        if path == "/v1/speakers":
            return Response(200, orjson.dumps({"speaker_reference_id": REFERENCE}))
        body = orjson.loads(request.body or b"{}")
        if path == "/v1/score/batch":
            results = [{"score": 0.5, "request_id": item["request_id"]} for item in body["items"]]
            return Response(200, orjson.dumps({"results": results}))
        return Response(200, orjson.dumps({"score": 0.25, "request_id": body["request_id"], "cer": 0.0}))


def _calls(tmp: Any) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """One call of each public method, every argument given (not its default)."""
    wave = np.linspace(-0.5, 0.5, 1600, dtype=np.float32)
    path = tmp / "reference.wav"
    import soundfile

    soundfile.write(path, wave, 16000)
    items = [ScoreItem(wave, 16000, f"item {i}", request_id=f"item-{i}") for i in range(3)]
    return [
        ("score", (wave, 16000, "hello"), {
            "language": "en", "metadata": {"split": "val", "step": 3}, "reward": RewardOptions(),
            "reference_duration_s": 0.2, "request_id": "one", "speaker_reference_id": REFERENCE,
            "measure_quality": True}),
        ("score_file", (path, "hello"), {
            "language": "en", "metadata": {"split": "val"}, "reward": RewardOptions(), "reference_duration_s": 0.1,
            "request_id": "file", "speaker_reference_id": REFERENCE, "measure_quality": True}),
        ("score_many", (iter(items),), {"concurrency": 1, "chunk_size": 2, "return_exceptions": False}),
        ("register_speaker", (wave, 16000), {}),
        ("register_speaker_file", (path,), {}),
        ("info", (URL,), {}),
        ("ready", (URL,), {}),
    ]


def _sent(transport: RecordingTransport) -> list[tuple[str, str, dict[str, str], bytes | None]]:
    """The requests, less the ids the client draws at random (a speaker registration's X-Request-ID)."""
    return [(r.method, r.url, {k: v for k, v in r.headers.items() if not r.url.endswith("/v1/speakers")
                               or k != "X-Request-ID"}, r.body) for r in transport.requests]


def test_each_method_sends_the_same_requests_and_answers_the_same_on_both_faces(tmp_path: Any) -> None:
    calls = _calls(tmp_path)
    assert {name for name, _, _ in calls} == set(_public(AsyncScorerClient)) - {"aclose", "closed"}, \
        "a public method of the client is not called here"
    settings = {"max_retries": 0, "concurrency": 3, "chunk_size": 5, "api_key": "key"}

    async_transport = RecordingTransport()

    async def run_async() -> list[Any]:
        async with AsyncScorerClient(URL, transport=async_transport, **settings) as client:
            return [await getattr(client, name)(*args, **kwargs) for name, args, kwargs in _calls(tmp_path)]

    async_answers = asyncio.run(run_async())

    sync_transport = RecordingTransport()
    with ScorerClient(URL, transport=sync_transport, **settings) as client:
        sync_answers = [getattr(client, name)(*args, **kwargs) for name, args, kwargs in calls]

    assert sync_answers == async_answers
    assert _sent(sync_transport) == _sent(async_transport)
    assert len(sync_transport.requests) >= len(calls)


def test_the_sync_face_reads_a_generator_of_items_in_the_calling_thread() -> None:
    """The loop thread serves every thread's calls: the caller's own code (a generator) runs in the caller."""
    readers: list[threading.Thread] = []

    def items() -> Iterator[ScoreItem]:
        for i in range(2):
            readers.append(threading.current_thread())
            yield ScoreItem(np.zeros(160, dtype=np.float32), 16000, "x", request_id=f"gen-{i}")

    with ScorerClient(URL, transport=RecordingTransport()) as client:
        results = client.score_many(items())
    assert [r.request_id for r in results] == ["gen-0", "gen-1"]
    assert readers == [threading.current_thread()] * 2
