"""The FastAPI dependency every router reads the app's parts through (:class:`..parts.ServerParts`, on
``app.state.parts``): ``parts: Parts`` in a route's signature.

It is a coroutine although it only reads an attribute: FastAPI runs a plain ``def`` dependency in its
thread pool, one hop per dependency and request, which cost more than a millisecond each at concurrency 1
on a loaded machine (``bench/latency_profile.py``).  Code that needs the parts outside dependency injection
calls :func:`parts_of`.
"""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request

from ..parts import ServerParts


def parts_of(request: Request) -> ServerParts:
    """The parts of the app serving ``request``."""
    return cast(ServerParts, request.app.state.parts)


async def get_parts(request: Request) -> ServerParts:
    return parts_of(request)


Parts = Annotated[ServerParts, Depends(get_parts)]
"""A route's parameter ``parts: Parts``: the settings, engine client, pipeline, signals... it was built with."""
