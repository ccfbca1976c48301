"""ClientSettings over the environment (its own and the shared names), and compute_score's use of it."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from audio_reward import scorer_client
from audio_reward.scorer_client import (
    ClientSettings,
    InvalidInputError,
    InvalidURLError,
    UnsupportedProtocolError,
)
from audio_reward.scorer_client.settings import url_in_environment
from audio_reward.trainer_plugin import verl_omni_score as compute_module
from audio_reward.trainer_plugin.verl_omni_score import compute_score


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [k for k in os.environ if k.startswith("AUDIO_REWARD_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_an_exported_but_empty_variable_is_unset(env: pytest.MonkeyPatch) -> None:
    env.setenv("AUDIO_REWARD_API_KEY", "")
    env.setenv("AUDIO_REWARD_CLIENT_TIMEOUT", "")
    s = ClientSettings("http://x:1")
    assert s.api_key is None and s.timeout == ClientSettings.model_fields["timeout"].default


def test_the_shared_key_is_read_and_the_clients_own_name_wins(env: pytest.MonkeyPatch) -> None:
    env.setenv("AUDIO_REWARD_API_KEY", "shared")
    assert ClientSettings("http://x:1").api_key == "shared"
    env.setenv("AUDIO_REWARD_CLIENT_API_KEY", "own")
    assert ClientSettings("http://x:1").api_key == "own"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"timeout": 0}, "compute_score: timeout: Input should be greater than 0"),
    ({"max_retries": True}, "compute_score: max_retries must be a number, got True"),
    ({"retry_backoff": -1.0}, "compute_score: retry_backoff: Input should be greater than or equal to 0"),
])
def test_compute_score_refuses_bad_settings_in_one_line_naming_its_argument(
        env: pytest.MonkeyPatch, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        asyncio.run(compute_score(([0.0] * 160, 16000), "t", server_url="http://x:1", **kwargs))
    assert str(info.value) == message


def test_compute_score_keeps_one_client_per_loop_and_settings(env: pytest.MonkeyPatch) -> None:
    async def clients() -> tuple[object, object, object]:
        same = ClientSettings("http://x:1", timeout=3)
        cache = compute_module.CLIENT_CACHE
        first = await cache.client(same)
        again = await cache.client(ClientSettings("http://x:1/", timeout=3.0))
        other = await cache.client(ClientSettings("http://x:1", timeout=4))
        await compute_module.close_cached_clients()
        return first, again, other

    first, again, other = asyncio.run(clients())
    assert first is again and other is not first


def test_a_url_variable_counts_in_any_case_as_the_settings_read_it(env: pytest.MonkeyPatch) -> None:
    assert not url_in_environment()
    env.setenv("audio_reward_url", "http://x:1")
    assert url_in_environment() and ClientSettings().urls == ("http://x:1",)


def _settings(*args: Any) -> ClientSettings:
    return compute_module.CLIENT_CACHE.settings(args, lambda: compute_module._build_settings(*args))


def test_compute_score_builds_its_settings_once_per_arguments_and_environment(env: pytest.MonkeyPatch) -> None:
    first = _settings("http://x:1", 3.0, 2, 0.5, None)
    assert _settings("http://x:1", 3.0, 2, 0.5, None) is first
    env.setenv("AUDIO_REWARD_CLIENT_DEADLINE", "30")  # the environment is part of what the settings are
    changed = _settings("http://x:1", 3.0, 2, 0.5, None)
    assert changed is not first and changed.deadline == 30.0
    with pytest.raises(ValueError, match="compute_score: timeout"):
        _settings("http://x:1", [3.0], 2, 0.5, None)  # unhashable: built each time, and refused


def test_the_client_cache_is_bounded_and_closes_what_it_evicts(env: pytest.MonkeyPatch) -> None:
    from audio_reward.scorer_client.client_cache import ClientCache

    async def run() -> None:
        cache = ClientCache(max_clients=2, max_settings=2)
        a, b, c = (ClientSettings("http://x:1", timeout=t) for t in (1, 2, 3))
        first = await cache.client(a)
        second = await cache.client(b)
        await cache.client(a)  # used again: b is now the least recently used
        third = await cache.client(c)
        assert cache.clients() == [first, third] and cache.held() == 2
        assert second.closed and not first.closed
        await cache.aclose()
        assert first.closed and cache.held() == 0
        built: list[int] = []
        for n in (1, 2, 3, 1):
            cache.settings((n,), lambda n=n: built.append(n) or a)  # type: ignore[func-returns-value]
        assert built == [1, 2, 3, 1]  # three distinct keys in a memo of two: the first was forgotten

    asyncio.run(run())


def test_a_url_without_a_scheme_is_taken_as_http() -> None:
    settings = ClientSettings(["127.0.0.1:8000", "scorer.internal:9000/v1/score", "https://a.example/"])
    assert settings.urls == ("http://127.0.0.1:8000", "http://scorer.internal:9000/v1/score", "https://a.example")
    assert settings.endpoints[1].base == "http://scorer.internal:9000"


def test_a_bad_url_is_one_line_without_pydantic_links() -> None:
    from pydantic import ValidationError

    from audio_reward.settings_flags import one_line

    with pytest.raises(ValidationError) as info:
        ClientSettings("ftp://scorer:8000")
    line = one_line(info.value)
    assert line == "urls: scorer URL 'ftp://scorer:8000' has an unsupported protocol 'ftp://': use http:// or https://"


@pytest.mark.parametrize(("url", "error", "says"), [
    ("http//127.0.0.1:8000", InvalidURLError, "is malformed: did you mean http://127.0.0.1:8000?"),
    ("https//scorer:8000/v1", InvalidURLError, "is malformed: did you mean https://scorer:8000/v1?"),
    ("http:/127.0.0.1:8000", InvalidURLError, "is malformed: did you mean http://127.0.0.1:8000?"),
    ("ftp://scorer:8000", UnsupportedProtocolError, "has an unsupported protocol 'ftp://': use http:// or https://"),
    ("http://", InvalidURLError, "has no host"),
    ("http://scorer:99999", InvalidURLError, "has an invalid port"),
    ("http://scorer:80 80", InvalidURLError, "holds white space"),
])
@pytest.mark.parametrize("make", ["AsyncScorerClient", "ScorerClient", "compute_score"])
def test_a_malformed_url_is_one_typed_line_when_the_client_is_made(url: str, error: type, says: str,
                                                                   make: str) -> None:
    """Issue 40, finding 2: a typo is refused before anything is sent, as httpx's InvalidURL, not retried against
    a host called "http" nor reported as pydantic's several-line ValidationError."""
    with pytest.raises(error) as info:
        if make == "compute_score":
            asyncio.run(compute_score(([0.0] * 160, 16000), "t", server_url=url))
        else:
            getattr(scorer_client, make)(url)
    assert isinstance(info.value, InvalidInputError) and isinstance(info.value, ValueError)
    assert str(info.value) == f"scorer URL {url.strip()!r} {says}" or says in str(info.value)
    assert "\n" not in str(info.value) and "pydantic" not in str(info.value)


def test_urls_that_only_look_odd_are_still_taken() -> None:
    settings = ClientSettings(["localhost:8000", "http:8000", "HTTP://Scorer:1/"])
    assert settings.urls == ("http://localhost:8000", "http://http:8000", "http://Scorer:1")
