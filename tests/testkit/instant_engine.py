"""The instant engine: the real server with an engine that answers at once.

It reads a number written into the first sample of each clip (:func:`clip`)
and answers ``item <number>`` (:func:`prompt_of`), so a response carrying
another request's transcript scores below 1 and is caught; a clip carrying
text instead (the toy task's speech, ``toy_task.speech.text_clip``) is
answered with that text.  ``delay_s`` makes
every engine call take that long (a slow engine); a call holding a clip
numbered below zero raises (a faulty engine).  Load runs, fault tests and
benchmarks use it to measure the server's queueing, batching and HTTP path
rather than the model.

    python -m tests.testkit.instant_engine [--engine-delay-ms MS] [serve flags...]

is ``audio-reward serve`` with this engine registered as ``instant``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from audio_reward.scorer_server.engines.base import (
    ASREngine,
    EngineInfo,
    Transcription,
    TranscriptionInput,
)
from audio_reward.trainer_plugin.toy_task.speech import WATERMARK_SCALE, text_of, watermark
from audio_reward.trainer_plugin.toy_task.speech import instant_transcript as prompt_of
from audio_reward.trainer_plugin.toy_task.speech import number_of as index_of

from .speech import tone

__all__ = ["WATERMARK_SCALE", "InstantEngine", "clip", "index_of", "main", "prompt_of", "watermark"]

SAMPLE_RATE = 16_000


def clip(index: int, seconds: float = 0.1) -> np.ndarray:
    """A short tone whose first sample carries ``index`` for :class:`InstantEngine`."""
    return watermark(tone(seconds, rate=SAMPLE_RATE), index)


class InstantEngine(ASREngine):
    """Answers at once with ``item <n>``, n read from the clip's first sample, or with the text a clip carries."""

    delay_s = 0.0

    def __init__(self, config: Any = None) -> None:
        self.info = EngineInfo("instant", "instant-bench-engine")
        self.batches = 0

    def load(self) -> None:
        """Nothing to load."""

    def warmup(self) -> None:
        """Nothing to warm up."""

    async def transcribe(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        self.batches += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        numbers = [index_of(item.audio) for item in batch]
        if min(numbers) < 0:
            raise RuntimeError(f"poison clip in engine call {self.batches}")
        texts = [text_of(item.audio) for item in batch]
        return [Transcription(prompt_of(n) if text is None else text) for n, text in zip(numbers, texts, strict=True)]


def main(argv: Sequence[str] | None = None) -> int:
    """``audio-reward serve --engine instant`` with the instant engine registered."""
    parser = argparse.ArgumentParser(prog="python -m tests.testkit.instant_engine", add_help=False)
    parser.add_argument("--engine-delay-ms", type=float, default=0.0)
    own, rest = parser.parse_known_args(argv)
    from audio_reward.cli import main as cli_main
    from audio_reward.scorer_server.engines import registry

    # The registry imports the class by its dotted path: this module runs as __main__, so set the
    # delay on the importable module's class, the one the registry will build.
    from tests.testkit import instant_engine

    instant_engine.InstantEngine.delay_s = own.engine_delay_ms / 1000.0
    registry.ENGINES["instant"] = "tests.testkit.instant_engine:InstantEngine"
    return cli_main(["serve", "--engine", "instant", *rest])


if __name__ == "__main__":
    sys.exit(main())
