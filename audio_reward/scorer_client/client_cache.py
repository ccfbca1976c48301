"""Clients reused across calls, for callers handed settings rather than a client.

verl calls a reward function (the trainer plugin's ``compute_score``) once per sample, thousands of times, with
the same arguments: opening a client (a connection pool) per call, or even validating the settings per call,
would cost more than the request. A :class:`ClientCache` keeps, for each event loop, one client per distinct
settings, and remembers the settings built from each set of arguments and ``AUDIO_REWARD_*`` environment. Both
are bounded: the least recently used entry goes first, and an evicted client is closed. A loop's clients close
by themselves when the loop shuts down (``asyncio.run`` and ``asyncio.Runner`` call ``shutdown_asyncgens``
first), so no session is left open.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Hashable
from dataclasses import dataclass, field

from .async_client import AsyncScorerClient
from .settings import ClientSettings

__all__ = ["ClientCache"]

ENVIRONMENT_PREFIX = "AUDIO_REWARD_"


@dataclass
class _LoopClients:
    clients: OrderedDict[ClientSettings, AsyncScorerClient] = field(default_factory=OrderedDict)
    closer: AsyncGenerator[None, None] | None = None
    """Held here: the loop keeps only a weak reference to the generators it will close at shutdown."""


class ClientCache:
    """Per event loop, one client per settings (at most ``max_clients`` per loop); settings per arguments."""

    def __init__(self, *, max_clients: int = 8, max_settings: int = 64) -> None:
        if max_clients < 1 or max_settings < 1:
            raise ValueError("max_clients and max_settings must be at least 1")
        self.max_clients = max_clients
        self.max_settings = max_settings
        self._loops: dict[asyncio.AbstractEventLoop, _LoopClients] = {}
        self._settings: OrderedDict[tuple[Hashable, ...], ClientSettings] = OrderedDict()
        self._lock = threading.Lock()  # loops in several threads may share one cache

    def settings(self, args: tuple[Hashable, ...], build: Callable[[], ClientSettings]) -> ClientSettings:
        """The settings ``build()`` gives for ``args`` under the current ``AUDIO_REWARD_*`` environment, built
        once per distinct pair. Unhashable arguments are built each time (and refused by ``build`` if bad)."""
        environment = tuple(sorted((k, v) for k, v in os.environ.items() if k.upper().startswith(ENVIRONMENT_PREFIX)))
        key = (*args, environment)
        try:
            hash(key)
        except TypeError:
            return build()
        with self._lock:
            found = self._settings.get(key)
            if found is not None:
                self._settings.move_to_end(key)
                return found
        settings = build()
        with self._lock:
            self._settings[key] = settings
            while len(self._settings) > self.max_settings:
                self._settings.popitem(last=False)
        return settings

    async def client(self, settings: ClientSettings) -> AsyncScorerClient:
        """The running loop's client for ``settings``; opened on first use."""
        loop = asyncio.get_running_loop()
        evicted: list[AsyncScorerClient] = []
        start_closer = None
        with self._lock:
            for ended in [lp for lp in self._loops if lp.is_closed()]:
                del self._loops[ended]
            mine = self._loops.setdefault(loop, _LoopClients())
            client = mine.clients.get(settings)
            if client is not None and not client.closed:
                mine.clients.move_to_end(settings)
                return client
            client = mine.clients[settings] = AsyncScorerClient(settings=settings)
            while len(mine.clients) > self.max_clients:
                evicted.append(mine.clients.popitem(last=False)[1])
            if mine.closer is None:
                mine.closer = start_closer = self._close_at_shutdown()
        if start_closer is not None:
            await start_closer.__anext__()  # started, so the loop tracks it and closes it at shutdown
        for old in evicted:
            await old.aclose()
        return client

    def clients(self, loop: asyncio.AbstractEventLoop | None = None) -> list[AsyncScorerClient]:
        """The clients held for ``loop`` (the running one by default)."""
        loop = loop or asyncio.get_running_loop()
        with self._lock:
            mine = self._loops.get(loop)
            return list(mine.clients.values()) if mine is not None else []

    def held(self) -> int:
        """How many clients the cache holds, over every loop."""
        with self._lock:
            return sum(len(m.clients) for m in self._loops.values())

    async def aclose(self) -> None:
        """Close the running loop's clients (the loop's shutdown does it too)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            mine = self._loops.pop(loop, None)
        for client in mine.clients.values() if mine is not None else ():
            await client.aclose()

    async def _close_at_shutdown(self) -> AsyncGenerator[None, None]:
        # A suspended async generator is closed by the loop's shutdown_asyncgens() while the loop still runs.
        try:
            yield
        finally:
            await self.aclose()
