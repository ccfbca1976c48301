"""A server that keeps answering ``unknown_speaker_reference`` right after each re-registration.

The retry after a re-registration goes back to the same server at once and spends no retry, but never twice
in a row: the attempt after it is an ordinary retry, so such a server costs the call its retries and the call
ends, as with any other fault.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from aiohttp import web

from audio_reward.scorer_client import AsyncScorerClient, ScorerUnavailableError
from tests.testkit.fault_server import FaultServer, Seen, Status

REFERENCE = "a" * 64


def _unknown(seen: Seen) -> Status:
    return Status(404, code="unknown_speaker_reference", retryable=False)


class ForgetfulServer(FaultServer):
    """Takes every speaker registration (always :data:`REFERENCE`) and forgets it at once."""

    def __init__(self) -> None:
        super().__init__(_unknown)
        self.registrations = 0

    def add_routes(self, app: web.Application) -> None:
        super().add_routes(app)
        app.router.add_post("/v1/speakers", self._speakers)

    async def _speakers(self, request: web.Request) -> web.Response:
        await request.read()
        self.registrations += 1  # one event loop serves every request: no lock needed
        return web.json_response({"speaker_reference_id": REFERENCE, "protocol_version": "1"})


def test_a_server_that_forgets_each_re_registration_ends_the_call_after_its_retries(tone: np.ndarray) -> None:
    async def run(server: ForgetfulServer) -> ScorerUnavailableError:
        async with AsyncScorerClient(server.url, max_retries=2, backoff=0.01, backoff_max=0.05) as client:
            reference = await client.register_speaker(np.tile(tone, 8), 16_000)
            assert reference == REFERENCE
            with pytest.raises(ScorerUnavailableError) as raised:
                await client.score(tone, 16_000, "hello", speaker_reference_id=reference)
            return raised.value

    with ForgetfulServer() as server:
        error = asyncio.run(run(server))
    # Each attempt meets the reference evicted and registers it again; the free retry after it (back at
    # once) meets the same, so the next one is ordinary.  Three ordinary attempts (the first and
    # max_retries=2), each followed by a free one: six.
    assert error.attempts == 6
    assert sum(server.received.values()) == 6
    assert server.registrations == 1 + 6  # register_speaker, then after each unknown_speaker_reference
