"""The synchronous scorer client: the async client on a loop thread the client owns."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..protocol import RewardOptions
from .async_client import AsyncScorerClient
from .errors import ScorerError
from .settings import ClientSettings
from .transport import AsyncTransport
from .wire import ScoreItem, ScoreResult

T = TypeVar("T")


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    if loop.is_running():
        loop.call_soon_threadsafe(loop.stop)
    if thread is not threading.current_thread():
        thread.join(timeout=5)


class ScorerClient:
    """Scores candidates from synchronous code; safe to share between threads.

    The client starts one daemon thread running an event loop and one
    :class:`AsyncScorerClient` on it, so every calling thread shares one
    connection pool and the same retry rules.  Calls block the calling
    thread only; they may run concurrently from many threads.  Close with
    :meth:`close` or a ``with`` block (an unclosed client is closed when
    garbage-collected).  Takes the same arguments as :class:`AsyncScorerClient`
    and offers the same methods (``tests/unit/client/test_client_parity.py`` holds
    the two to that).
    """

    def __init__(
        self,
        urls: str | Sequence[str] | None = None,
        *,
        settings: ClientSettings | None = None,
        transport: AsyncTransport | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        deadline: float | None = None,
        max_retries: int | None = None,
        backoff: float | None = None,
        backoff_max: float | None = None,
        retry_after_max: float | None = None,
        pool_limit: int | None = None,
        concurrency: int | None = None,
        chunk_size: int | None = None,
    ) -> None:
        self._async = AsyncScorerClient(
            urls, settings=settings, transport=transport, api_key=api_key, timeout=timeout,
            connect_timeout=connect_timeout, deadline=deadline, max_retries=max_retries, backoff=backoff,
            backoff_max=backoff_max, retry_after_max=retry_after_max, pool_limit=pool_limit,
            concurrency=concurrency, chunk_size=chunk_size,
        )
        self.settings: ClientSettings = self._async.settings
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="audio-reward-client", daemon=True)
        self._thread.start()
        self._closed = False
        self._close_lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _stop_loop, self._loop, self._thread)

    def __enter__(self) -> ScorerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._closed

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()
            raise RuntimeError("this ScorerClient is closed")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            coro.close()
            raise RuntimeError("ScorerClient called from its own event loop thread")
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            # KeyboardInterrupt or similar in the calling thread: stop the request too.
            future.cancel()
            raise

    def score(
        self,
        waveform: Any,
        sample_rate: int,
        text: str,
        *,
        language: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reward: RewardOptions | Mapping[str, Any] | None = None,
        reference_duration_s: float | None = None,
        request_id: str | None = None,
        speaker_reference_id: str | None = None,
        measure_quality: bool = False,
    ) -> ScoreResult:
        """Score one candidate; see :meth:`AsyncScorerClient.score`."""
        return self._run(self._async.score(
            waveform, sample_rate, text, language=language, metadata=metadata, reward=reward,
            reference_duration_s=reference_duration_s, request_id=request_id,
            speaker_reference_id=speaker_reference_id, measure_quality=measure_quality,
        ))

    def score_many(
        self,
        items: Iterable[ScoreItem | Mapping[str, Any] | tuple[Any, int, str]],
        *,
        concurrency: int | None = None,
        chunk_size: int | None = None,
        return_exceptions: bool = True,
    ) -> list[ScoreResult | ScorerError]:
        """Score many candidates in order; see :meth:`AsyncScorerClient.score_many`."""
        return self._run(self._async.score_many(
            list(items), concurrency=concurrency, chunk_size=chunk_size, return_exceptions=return_exceptions,
        ))

    def register_speaker(self, waveform: Any, sample_rate: int) -> str:
        """Register a speaker's reference recording; see :meth:`AsyncScorerClient.register_speaker`."""
        return self._run(self._async.register_speaker(waveform, sample_rate))

    def register_speaker_file(self, path: str | Path) -> str:
        """Register a reference recording on disk; see :meth:`AsyncScorerClient.register_speaker_file`."""
        return self._run(self._async.register_speaker_file(path))

    def info(self, url: str | None = None) -> dict[str, Any]:
        """The server's ``GET /v1/info``."""
        return self._run(self._async.info(url))

    def ready(self, url: str | None = None) -> bool:
        """True when the server answers ``GET /readyz`` with 200."""
        return self._run(self._async.ready(url))

    def close(self) -> None:
        """Close the connections and stop the loop thread; idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._async.aclose(), self._loop).result(timeout=10)
        finally:
            self._finalizer()
            if not self._thread.is_alive():
                self._loop.close()
