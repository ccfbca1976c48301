"""Client settings: one typed object, from arguments, ``AUDIO_REWARD_CLIENT_*`` variables and defaults.

Precedence, highest first: the arguments given, ``AUDIO_REWARD_CLIENT_<FIELD>``
variables, the shared ``AUDIO_REWARD_URL`` / ``AUDIO_REWARD_API_KEY`` (the
names users set for the server and its clients alike), the defaults below.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AliasChoices, BeforeValidator, Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ..environment import API_KEY_ENV, URL_ENV, masked
from .errors import InvalidURLError, UnsupportedProtocolError

ENV_PREFIX = "AUDIO_REWARD_CLIENT_"
URL_ENVS = (f"{ENV_PREFIX}URLS", URL_ENV)
"""The variables that name the scorer URL(s), the first found wins."""

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


# "http//host", "http:/host", "http:host": a scheme whose "://" was mistyped. Without this check the text
# before the slip would be read as a host called "http" and retried as an unreachable server.
_MISTYPED_SCHEME = re.compile(r"^(https?)(//|:/(?!/)|:(?![0-9/]))(.+)$", re.IGNORECASE)
_URL_FORM = "http(s)://host[:port][/prefix][/score]"


def normalize_url(url: str) -> str:
    """``url`` checked (http or https, a host, a valid port, no query or fragment) and without a trailing slash.

    A URL written without a scheme (``127.0.0.1:8000``, ``scorer:8000/v1``) is taken as ``http://``.  A URL
    the client cannot use raises :class:`~.errors.InvalidURLError` (a ``ValueError``) in one line, as httpx's
    ``InvalidURL``; a scheme other than http(s) raises :class:`~.errors.UnsupportedProtocolError`.
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidURLError(f"scorer URL must be a non-empty string, got {url!r}")
    url = url.strip()
    if any(c.isspace() for c in url):
        raise InvalidURLError(f"scorer URL {url!r} holds white space; expected {_URL_FORM}")
    if "://" not in url:
        if typo := _MISTYPED_SCHEME.match(url):
            scheme, _, rest = typo.groups()
            raise InvalidURLError(f"scorer URL {url!r} is malformed: did you mean {scheme.lower()}://{rest}?")
        url = f"http://{url}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise UnsupportedProtocolError(
            f"scorer URL {url!r} has an unsupported protocol '{parts.scheme}://': use http:// or https://")
    if not parts.hostname:
        raise InvalidURLError(f"scorer URL {url!r} has no host; expected {_URL_FORM}")
    try:
        parts.port  # noqa: B018 - reading it is the check: urlsplit raises on a port that is not 0-65535
    except ValueError as exc:
        raise InvalidURLError(f"scorer URL {url!r} has an invalid port ({exc})") from None
    if parts.query or parts.fragment:
        raise InvalidURLError(f"scorer URL must not carry a query or fragment, got {url!r}")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def url_error(exc: ValidationError) -> InvalidURLError | None:
    """The :class:`~.errors.InvalidURLError` behind a settings error, where a URL was what failed; else None.

    pydantic wraps a validator's error in a ``ValidationError`` of several lines with a link per error; a
    client raises the URL's own one-line error instead.
    """
    causes = ((error.get("ctx") or {}).get("error") for error in exc.errors())
    return next((cause for cause in causes if isinstance(cause, InvalidURLError)), None)


def endpoint_of(url: str) -> ScorerEndpoint:
    """The endpoints one scorer URL stands for (see :class:`ScorerEndpoint`)."""
    url = normalize_url(url)
    # The first endpoint path the URL ends in is its own; the server root gets the other requests' paths.
    path = next((p for p in (BATCH_PATH, SCORE_PATH, COMPAT_SCORE_PATH) if url.endswith(p)), "")
    base = url[: len(url) - len(path)]
    return ScorerEndpoint(url, base, url if path in (SCORE_PATH, COMPAT_SCORE_PATH) else base + SCORE_PATH,
                          url if path == BATCH_PATH else base + BATCH_PATH)


def url_in_environment() -> bool:
    """Whether a scorer URL variable (``AUDIO_REWARD_CLIENT_URLS`` or the shared one) is set and not empty.

    Names match in any case, as :class:`ClientSettings` reads them.
    """
    return any(value for name, value in os.environ.items() if name.upper() in URL_ENVS)


def trainer_waits(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with ``wait_while_busy`` on unless given or set by its variable: the trainer plugin's client
    has nothing to do but wait for its rewards while the scorer answers "not now" (429 with Retry-After, as its
    early refusal does under the trainer's own load)."""
    variable = f"{ENV_PREFIX}WAIT_WHILE_BUSY"
    if any(name.upper() == variable for name in os.environ):
        return dict(values)
    return {"wait_while_busy": True, **values}


def split_commas(value: Any) -> Any:
    """``"http://a, http://b"`` -> ``("http://a", "http://b")`` (how lists are written in variables); others pass."""
    if isinstance(value, str):
        return tuple(u for u in (p.strip() for p in value.split(",")) if u)
    return value


class ClientSettings(BaseSettings):
    """Everything that shapes the client's traffic.

    ``timeout`` bounds one attempt; ``deadline`` (optional) bounds one
    request across all its attempts and waits; without it a request still
    ends after ``max_retries + 1`` bounded attempts.  ``ClientSettings(url)``
    takes the URL(s) as its one positional argument.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, populate_by_name=True, validate_default=True,
        env_ignore_empty=True,  # an exported but empty variable (KEY=) means unset, as in a shell
    )

    urls: Annotated[tuple[str, ...], NoDecode, BeforeValidator(split_commas)] = Field(
        (), validation_alias=AliasChoices(*URL_ENVS),
        description="Scorer URL(s); load is spread round-robin and a retry goes to the next URL "
                    f"(env: comma separated; ${URL_ENV} is shared with the server's clients).")
    api_key: str | None = Field(
        None, min_length=1, repr=False, validation_alias=AliasChoices(f"{ENV_PREFIX}API_KEY", API_KEY_ENV),
        description=f"Sent as Authorization: Bearer <key> (default: ${API_KEY_ENV}, the server's key).")
    timeout: float = Field(120.0, gt=0, allow_inf_nan=False, description="Seconds per attempt.")
    connect_timeout: float = Field(10.0, gt=0, allow_inf_nan=False, description="Seconds to connect.")
    deadline: float | None = Field(None, gt=0, allow_inf_nan=False,
                                   description="Seconds per request across all attempts and waits.")
    max_retries: int = Field(3, ge=0, description="Retries of transient faults after the first attempt.")
    backoff: float = Field(0.5, ge=0, allow_inf_nan=False, description="Backoff base (seconds).")
    backoff_max: float = Field(30.0, gt=0, allow_inf_nan=False, description="Backoff cap (seconds).")
    retry_after_max: float = Field(60.0, gt=0, allow_inf_nan=False, description="Longest Retry-After honoured.")
    wait_while_busy: bool = Field(
        False, description="An attempt the scorer answered with 'not now' (its 429 queue_full or overloaded, its "
                           "503 not_ready) or with some items scored spends no retry: the client waits as long as "
                           "the scorer answers so, bounded by the deadline alone.  The trainer plugin turns it on.")
    pool_limit: int = Field(64, ge=1, description="Connections per client (and requests in flight).")
    concurrency: int = Field(4, ge=1, description="Batch requests in flight (score_many).")
    chunk_size: int = Field(16, ge=1, description="Items per batch request (score_many).")

    def __init__(self, urls: str | Sequence[str] | None = None, /, **values: Any) -> None:
        if urls is not None:
            values["urls"] = urls
        super().__init__(**values)

    @field_validator("urls")
    @classmethod
    def _check_urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError(f"no scorer URL: pass one or set {URL_ENV}")
        return tuple(normalize_url(u) for u in value)

    @field_validator("timeout", "connect_timeout", "deadline", "max_retries", "backoff", "backoff_max",
                     "retry_after_max", "pool_limit", "concurrency", "chunk_size", mode="before")
    @classmethod
    def _no_bool(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads True as 1; a flag where a number belongs is a mistake worth refusing.
        if isinstance(value, bool):
            raise ValueError(f"{info.field_name} must be a number, got {value!r}")
        return value

    @property
    def endpoints(self) -> tuple[ScorerEndpoint, ...]:
        """What each URL of ``urls`` sends where."""
        return tuple(endpoint_of(u) for u in self.urls)

    def describe(self) -> str:
        """One line per setting, the API key masked: what a command prints at start-up."""
        shown = {**self.model_dump(), "urls": ", ".join(self.urls), "api_key": masked(self.api_key)}
        return "\n".join(f"{name} = {value}" for name, value in shown.items())
