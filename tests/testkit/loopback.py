"""An aiohttp app on loopback, on its own thread and event loop.

Test servers that stand in for a peer (a misbehaving scorer, verl-omni's
protocol server) subclass :class:`LoopbackServer` and add their routes; the
thread lets sync and async clients in the test reach the same server.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import TypeVar

from aiohttp import web

S = TypeVar("S", bound="LoopbackServer")


class LoopbackServer:
    """``with Server() as s: s.url`` serves :meth:`add_routes`' app on a free loopback port."""

    max_body_bytes = 256 * 2**20

    def __init__(self) -> None:
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def add_routes(self, app: web.Application) -> None:
        """Add the server's routes to ``app``."""
        raise NotImplementedError

    def __enter__(self: S) -> S:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application(client_max_size=self.max_body_bytes)
        self.add_routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
