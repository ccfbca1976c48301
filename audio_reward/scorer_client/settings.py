"""Client settings: one typed object, built from arguments or ``AUDIO_REWARD_*`` variables."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

SCORE_PATH = "/v1/score"
BATCH_PATH = "/v1/score/batch"
INFO_PATH = "/v1/info"
COMPAT_SCORE_PATH = "/score"
"""verl-omni's protocol v1 path: its reference scorer serves this one alone."""


@dataclass(frozen=True)
class ScorerEndpoint:
    """Where one configured URL sends each kind of request.

    A URL whose path ends in an endpoint path (``/score``, ``/v1/score``,
    ``/v1/score/batch``) names that endpoint, and single requests go exactly
    there; any other URL is a server root (or a prefix behind a proxy) and
    gets ``/v1/score``.  ``base`` is the server root either way, where
    ``/v1/info`` and ``/readyz`` are asked.
    """

    url: str
    base: str
    score_url: str
    batch_url: str


def normalize_url(url: str) -> str:
    """``url`` checked (http or https, a host, no query or fragment) and without a trailing slash."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"scorer URL must be a non-empty string, got {url!r}")
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"scorer URL must be http(s)://host[:port][/prefix][/score], got {url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"scorer URL must not carry a query or fragment, got {url!r}")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def endpoint_of(url: str) -> ScorerEndpoint:
    """The endpoints one scorer URL stands for (see :class:`ScorerEndpoint`)."""
    url = normalize_url(url)
    if url.endswith(BATCH_PATH):
        base = url[: -len(BATCH_PATH)]
        return ScorerEndpoint(url, base, base + SCORE_PATH, url)
    for path in (SCORE_PATH, COMPAT_SCORE_PATH):
        if url.endswith(path):
            base = url[: -len(path)]
            return ScorerEndpoint(url, base, url, base + BATCH_PATH)
    return ScorerEndpoint(url, url, url + SCORE_PATH, url + BATCH_PATH)


def _positive(name: str, value: Any, *, allow_zero: bool = False, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value!r}")
    return float(value)


def _count(name: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class ClientSettings:
    """Everything that shapes the client's traffic.

    ``timeout`` bounds one attempt; ``deadline`` (optional) bounds one
    request across all its attempts and waits; without it a request still
    ends after ``max_retries + 1`` bounded attempts.
    """

    urls: tuple[str, ...]
    api_key: str | None = None
    timeout: float = 120.0
    connect_timeout: float = 10.0
    deadline: float | None = None
    max_retries: int = 3
    backoff: float = 0.5
    backoff_max: float = 30.0
    retry_after_max: float = 60.0
    pool_limit: int = 64
    concurrency: int = 4
    chunk_size: int = 16

    def __post_init__(self) -> None:
        urls = (self.urls,) if isinstance(self.urls, str) else tuple(self.urls)
        if not urls:
            raise ValueError("at least one scorer URL is required")
        object.__setattr__(self, "urls", tuple(normalize_url(u) for u in urls))
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key):
            raise ValueError("api_key must be a non-empty string when given")
        for name in ("timeout", "connect_timeout", "backoff_max", "retry_after_max"):
            object.__setattr__(self, name, _positive(name, getattr(self, name)))
        object.__setattr__(self, "backoff", _positive("backoff", self.backoff, allow_zero=True))
        object.__setattr__(self, "deadline", _positive("deadline", self.deadline, optional=True))
        _count("max_retries", self.max_retries, minimum=0)
        for name in ("pool_limit", "concurrency", "chunk_size"):
            _count(name, getattr(self, name), minimum=1)

    @classmethod
    def from_env(
        cls,
        urls: str | Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> "ClientSettings":
        """Settings from ``AUDIO_REWARD_*`` variables, then ``urls`` and ``overrides`` on top.

        ``AUDIO_REWARD_URL`` holds one URL or several separated by commas;
        every other field reads ``AUDIO_REWARD_<FIELD>`` (e.g. ``AUDIO_REWARD_MAX_RETRIES``).
        """
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f"AUDIO_REWARD_{'URL' if f.name == 'urls' else f.name.upper()}")
            if raw is None or raw == "":
                continue
            try:
                if f.name == "urls":
                    values["urls"] = tuple(u for u in (p.strip() for p in raw.split(",")) if u)
                elif f.name == "api_key":
                    values["api_key"] = raw
                elif f.name in ("max_retries", "pool_limit", "concurrency", "chunk_size"):
                    values[f.name] = int(raw)
                else:
                    values[f.name] = float(raw)
            except ValueError:
                raise ValueError(f"AUDIO_REWARD_{f.name.upper()}={raw!r} is not a valid {f.name}") from None
        if urls is not None:
            values["urls"] = urls
        values.update({k: v for k, v in overrides.items() if v is not None})
        if "urls" not in values:
            raise ValueError("no scorer URL: pass one or set AUDIO_REWARD_URL")
        return cls(**values)

    @property
    def endpoints(self) -> tuple[ScorerEndpoint, ...]:
        """What each URL of ``urls`` sends where."""
        return tuple(endpoint_of(u) for u in self.urls)

    def describe(self) -> str:
        """One line per setting, the API key masked: what a command prints at start-up."""
        lines = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "api_key" and value:
                value = "***"
            lines.append(f"{f.name} = {', '.join(value) if f.name == 'urls' else value}")
        return "\n".join(lines)
