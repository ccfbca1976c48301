"""The asyncio scorer client: the public methods, each a call of the shared core.

What a request holds, how it is retried and what an answer means is :class:`~.core.ScorerCore`'s, for this
client and :class:`~.sync_client.ScorerClient` alike; this face binds the core to one event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .audio_file import AudioFileError, read_audio
from .core import BaseScorerClient, ScorerCore, info_of
from .errors import InvalidInputError, ScorerError, ScorerUnavailableError
from .settings import INFO_PATH, endpoint_of
from .transport import AiohttpTransport, AsyncTransport, TransportError
from .wire import ScoreItem, ScoreOptions, ScoreResult, speaker_body

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack for **kwargs from Python 3.11

T = TypeVar("T")


class AsyncScorerClient(BaseScorerClient):
    """Scores candidates on one or more scorer servers from asyncio code.

    One instance holds one transport (by default an ``aiohttp`` session with
    a pooled connector) and belongs to the event loop it is first used in;
    use it as an async context manager or call :meth:`aclose`, which closes
    the transport too.  Several URLs spread the load round-robin, and a
    retry goes to the next URL.  ``transport=`` takes any
    :class:`~.transport.AsyncTransport` (as httpx's ``transport=`` does).

    Retries: connection errors, timeouts, 408, 429 and 5xx are retried up to
    ``max_retries`` times with exponential backoff and full jitter, waiting
    at least a server's ``Retry-After`` (capped by ``retry_after_max``).  Any
    other 4xx and any answer that breaks the protocol fail at once.
    """

    def _open(self, transport: AsyncTransport | None) -> None:
        self._transport = AiohttpTransport(self.settings.pool_limit) if transport is None else transport
        self._core = ScorerCore(self.settings, self._transport)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._speaker_files: dict[str, str] = {}

    async def __aenter__(self) -> AsyncScorerClient:
        self._bind()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the transport and its connections; the client cannot be used afterwards."""
        self._closed = True
        await self._transport.aclose()

    def _bind(self) -> ScorerCore:
        """The core, once this client is known open and used on its own event loop."""
        if self._closed:
            raise RuntimeError("this AsyncScorerClient is closed")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError(
                "an AsyncScorerClient belongs to the event loop it was first used in; "
                "create one client per event loop (or use ScorerClient from threads)"
            )
        return self._core

    async def score(self, waveform: Any, sample_rate: int, text: str, **options: Unpack[ScoreOptions]) -> ScoreResult:
        """Score one candidate.

        ``waveform`` is mono audio as a numpy array, a CPU torch tensor or a
        list (for a file on disk, :meth:`score_file`); ``text`` is what it should say.  The keyword
        arguments are :class:`ScoreItem`'s fields of the same names: ``speaker_reference_id`` (from
        :meth:`register_speaker`) adds its speaker similarity, ``measure_quality``
        its DNSMOS where the reward does not weigh it already.  Raises a
        :class:`ScorerError` subclass on failure (see :mod:`audio_reward.scorer_client.errors`).
        """
        core = self._bind()
        prepared = _raised((await core.prepare([ScoreItem(waveform, sample_rate, text, **options)]))[0])
        return _raised((await core.score([prepared], batch=False))[0])

    async def score_file(self, path: str | Path, text: str, **options: Unpack[ScoreOptions]) -> ScoreResult:
        """:meth:`score` for an audio file on disk, read as ``audio-reward score`` reads it.

        WAV, FLAC, MP3 and OGG everywhere; M4A, WebM and the other FFmpeg formats where PyAV is installed;
        several channels are averaged, and the file's own sample rate is sent.  A file that cannot be read
        raises :class:`InvalidInputError` naming it (nothing is sent).
        """
        self._bind()
        try:
            audio, rate = await asyncio.to_thread(read_audio, path)
        except AudioFileError as exc:
            raise InvalidInputError(str(exc), request_id=options.get("request_id")) from None
        return await self.score(audio, rate, text, **options)

    async def score_many(
        self,
        items: Iterable[ScoreItem | Mapping[str, Any] | tuple[Any, int, str]],
        *,
        concurrency: int | None = None,
        chunk_size: int | None = None,
        return_exceptions: bool = True,
    ) -> list[ScoreResult | ScorerError]:
        """Score many candidates through the batch endpoint, in order.

        Items go out in chunks of ``chunk_size``, ``concurrency`` chunks at a
        time.  A failed chunk or a retryable item error is retried for the
        items still unanswered only, with the same request ids, so no item is
        scored twice by this client and none is dropped: each position of the
        returned list holds its item's :class:`ScoreResult` or its
        :class:`ScorerError`.  With ``return_exceptions=False`` the first
        error (in item order) is raised after every item has finished.
        """
        # The chunks in flight and items per chunk: the arguments, else the settings'.
        concurrency = self.settings.concurrency if concurrency is None else concurrency
        chunk_size = self.settings.chunk_size if chunk_size is None else chunk_size
        for name, value in (("concurrency", concurrency), ("chunk_size", chunk_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        results = await self._bind().score_many(list(items), concurrency, chunk_size)
        if not return_exceptions:
            for r in results:
                _raised(r)
        return results

    async def register_speaker(self, waveform: Any, sample_rate: int) -> str:
        """Register a reference recording of a speaker; its ``speaker_reference_id`` for score requests.

        The recording is sent once per client, to one of its URLs (a second call with the same audio answers
        from the cache).  A server that lacks it, evicted or never sent it, answers a score request naming it
        with 404 ``unknown_speaker_reference``: the client then registers the recording on that server and
        sends the request there again at once, without spending a retry (once in a row; a second such answer
        is an ordinary retry).
        """
        core = self._bind()
        return _raised(await core.register(*speaker_body(waveform, sample_rate)))

    async def register_speaker_file(self, path: str | Path) -> str:
        """:meth:`register_speaker` for a recording on disk (WAV, FLAC...), read once per client and path.

        A file that cannot be read raises :class:`InvalidInputError` naming it.
        """
        key = str(path)
        if key not in self._speaker_files:
            try:
                audio, rate = await asyncio.to_thread(read_audio, path)
            except AudioFileError as exc:
                raise InvalidInputError(f"speaker reference: {exc}") from None
            self._speaker_files[key] = await self.register_speaker(audio, rate)
        return self._speaker_files[key]

    async def info(self, url: str | None = None) -> dict[str, Any]:
        """The server's ``GET /v1/info`` (model, limits, defaults); one attempt, no retries."""
        target = self._base(url) + INFO_PATH
        try:
            answer = await self._bind().get(target, self.settings.timeout)
        except TransportError as exc:
            raise ScorerUnavailableError(f"GET {target} failed: {exc!r}", attempts=1, last_cause=exc) from exc
        return info_of(answer)

    async def ready(self, url: str | None = None) -> bool:
        """True when ``GET /readyz`` answers 200 within the timeout."""
        try:
            answer = await self._bind().get(self._base(url) + "/readyz", self.settings.connect_timeout)
        except (TransportError, ScorerError):
            return False
        return answer.status == 200

    def _base(self, url: str | None) -> str:
        return self._core.endpoints[0].base if url is None else endpoint_of(url).base


def _raised(value: T | ScorerError) -> T:
    """``value``, unless it is an error: then that is raised."""
    if isinstance(value, ScorerError):
        raise value
    return value
