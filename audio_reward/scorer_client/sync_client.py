"""The synchronous scorer client: the async client on a loop thread the client owns.

Each method is the async client's, made blocking by :func:`_blocking`: its arguments, defaults, types and
documentation are the async method's own, so a method is written once, in :mod:`.async_client`, and named
here in one line.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from .async_client import AsyncScorerClient
from .core import BaseScorerClient
from .transport import AsyncTransport

T = TypeVar("T")
P = ParamSpec("P")


def _shut_down(client: AsyncScorerClient, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """Close ``client``'s connections on its loop, then stop the loop and its thread.

    The finalizer of every :class:`ScorerClient`, closed or not: a client that is garbage-collected or left
    open at exit closes its aiohttp session here, so aiohttp has no "Unclosed client session" to report.
    It may run in any thread, the loop's own included (the last reference dropped in a callback there).
    """
    if not loop.is_running():
        return
    if thread is threading.current_thread():  # cannot wait for the loop from inside it: stop once closed
        loop.create_task(client.aclose()).add_done_callback(lambda _: loop.stop())
        return
    try:
        asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=5)
    except (concurrent.futures.TimeoutError, RuntimeError):  # a loop stuck or stopping: leave it to the process
        pass
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)


def _blocking(
    method: Callable[Concatenate[AsyncScorerClient, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[ScorerClient, P], T]:
    """``method`` of the async client as a :class:`ScorerClient` method that blocks the calling thread.

    A one-shot iterator among the arguments (a generator of items) is read into a list in the calling thread
    first: the loop thread serves every thread's calls and must not run the caller's code.
    """

    start = cast(Callable[..., Coroutine[Any, Any, T]], method)  # called with the arguments read in

    @functools.wraps(method)
    def call(self: ScorerClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        read = [list(a) if isinstance(a, Iterator) else a for a in args]
        named = {k: list(v) if isinstance(v, Iterator) else v for k, v in kwargs.items()}
        return self._run(start(self._async, *read, **named))

    call.__qualname__ = f"ScorerClient.{method.__name__}"
    call.__module__ = __name__
    return call


class ScorerClient(BaseScorerClient, contextlib.AbstractContextManager["ScorerClient"]):
    """Scores candidates from synchronous code; safe to share between threads.

    The client starts one daemon thread running an event loop and one
    :class:`AsyncScorerClient` on it, so every calling thread shares one
    connection pool and the same retry rules.  Calls block the calling
    thread only; they may run concurrently from many threads.  Close with
    :meth:`close` or a ``with`` block; a client never closed closes its
    connections and stops its thread when garbage-collected or at exit,
    quietly.  Takes the same arguments as :class:`AsyncScorerClient`
    and offers the same methods (``tests/unit/client/test_client_parity.py`` holds
    the two to that).
    """

    def _open(self, transport: AsyncTransport | None) -> None:
        self._async = AsyncScorerClient(settings=self.settings, transport=transport)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="audio-reward-client", daemon=True)
        self._thread.start()
        self._close_lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _shut_down, self._async, self._loop, self._thread)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()
            raise RuntimeError("this ScorerClient is closed")
        if threading.current_thread() is self._thread:  # only its loop runs there
            coro.close()
            raise RuntimeError("ScorerClient called from its own event loop thread")
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            # KeyboardInterrupt or similar in the calling thread: stop the request too.
            future.cancel()
            raise

    score = _blocking(AsyncScorerClient.score)
    score_file = _blocking(AsyncScorerClient.score_file)
    score_many = _blocking(AsyncScorerClient.score_many)
    register_speaker = _blocking(AsyncScorerClient.register_speaker)
    register_speaker_file = _blocking(AsyncScorerClient.register_speaker_file)
    info = _blocking(AsyncScorerClient.info)
    ready = _blocking(AsyncScorerClient.ready)

    def close(self) -> None:
        """Close the connections and stop the loop thread; idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._finalizer()  # closes the connections, then stops the loop thread
        if not self._thread.is_alive():
            self._loop.close()
