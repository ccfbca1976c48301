"""DNSMOS's P.808 model cut in two, so that neighbouring windows with the same loudness reference share its
convolutions.

The P.808 model takes a window's mel spectrogram (900 frames, 10 ms apart, 120 bands) in dB against the
window's own loudest bin (speechmos's ``audio_melspec``), then runs four 3×3 convolutions and two 2×2 pools
(the *body*, about two thirds of its time), then a pool, a convolution, a global max pool and dense layers
(the *head*).  Two overlapping windows of a clip, a whole number of seconds apart (100 frames: on the grid of
the body's 4-frame output cells), with the same loudest bin have the same features at the same place in the
clip, except at their edges; so
the body computes, inside each window, what it computes at that place over the clip. A run of such windows
goes through the body once, over the clip's frames; only each window's first and last :data:`EDGE_CELLS`
cells, whose inputs reach the window's edge frames or its zero padding, come from its own edges.  A clip
doubled to fill a window has the same loudest bin in every window when its copies fall on the frame grid, as
Qwen3-TTS's do; a window with no such neighbour runs through the whole model.  On onnxruntime's CPU
provider the outputs equal the whole model's window by window, bit for bit where measured
(tests/integration/engines/test_signal_models.py allows 1e-5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .windows import WholeModel, open_parts, window_heads

WINDOW_FRAMES, BANDS = 900, 120
"""A window's features: 900 mel frames (10 ms apart) of 120 bands."""
CELL = 4
"""Frames in one cell of the body's output (two 2×2 pools)."""
EDGE_CELLS, EDGE_FRAMES = 3, 24
"""A cell of the body depends on the 11 frames before it and the 14 after its first: so a window's first and
last 3 cells reach its edge frames (its first and last, which differ from the clip's) or its zero padding,
and its first or last 24 frames, run alone, give them."""
MAX_SHARED_WINDOWS = 32
"""Windows whose features go through the body in one call (a run of 32 covers 40 s of the clip)."""

_INPUT, _BODY, _OUTPUT = "input_1", "mos_estimator_small_1/conv2d_8/Relu:0", "Identity:0"


@dataclass
class SharedWindowP808:
    """The P.808 model whole and in its two parts, as onnxruntime sessions; see the module docstring."""

    whole: WholeModel
    """(N, 900, 120) -> (N, 1): the model as speechmos runs it."""
    body: Any
    """(N, frames, 120) -> (N, 32, frames // 4, 30)."""
    head: Any
    """(N, 32, 225, 30) -> (N, 1)."""

    @classmethod
    def load(cls, path: str, options: Any, providers: list[str], whole: WholeModel | None = None
             ) -> SharedWindowP808:
        """Cut the model file at ``path`` and open its parts (and the whole model, unless given as ``whole``)
        with these onnxruntime options and providers."""
        import onnxruntime as ort

        body, head = open_parts(path, [(_INPUT, _BODY, (["N", "frames", BANDS], ["N", 32, "cells", 30])),
                                       (_BODY, _OUTPUT, (["N", 32, WINDOW_FRAMES // CELL, 30], ["N", 1]))],
                                options, providers)
        return cls(whole or WholeModel(ort.InferenceSession(path, options, providers=providers)), body, head)

    def window_scores(self, features: Sequence[np.ndarray], references: Sequence[float], offsets: Sequence[int],
                      max_windows_per_call: int) -> np.ndarray:
        """The P.808 MOS of each window of one clip, (len(features),).

        ``features`` are the windows' model inputs (each (900, 120), as speechmos's ``audio_melspec`` makes
        them); ``references``, each window's loudest mel bin, against which its dB are taken; ``offsets``, the
        frame where each starts in the clip, ascending multiples of 4.
        """
        if any(o % CELL for o in offsets):
            raise ValueError(f"a window must start on a cell of the body (a multiple of {CELL} frames)")
        out = np.zeros(len(features), dtype=np.float64)
        alone: list[int] = []
        first = 0
        while first < len(features):
            end = first + 1
            while (end < len(features) and end - first < MAX_SHARED_WINDOWS
                   and references[end] == references[first] and offsets[end] - offsets[end - 1] < WINDOW_FRAMES - 2):
                end += 1  # the insides of neighbours overlap or touch: together they cover the run's frames
            if end - first == 1:
                alone.append(first)
            else:
                out[first:end] = self._run(features[first:end], offsets[first:end], max_windows_per_call)
            first = end
        if alone:
            out[alone] = self.whole.window_scores([features[i] for i in alone], max_windows_per_call)[:, 0]
        return out

    def _run(self, run: Sequence[np.ndarray], offsets: Sequence[int], max_windows_per_call: int) -> np.ndarray:
        """The scores of a run of windows with the same reference: the body once over their frames."""
        at = [o - offsets[0] for o in offsets]
        frames = np.empty((at[-1] + WINDOW_FRAMES, BANDS), dtype=np.float32)
        # The clip's frames: each window's own but its edge frames (its first and last), which differ from
        # the clip's and are left only where no other window's inside covers them (the cells they reach are
        # replaced from the windows' own edges below).
        frames[:WINDOW_FRAMES], frames[-WINDOW_FRAMES:] = run[0], run[-1]
        for o, window in zip(at, run, strict=True):
            frames[o + 1:o + WINDOW_FRAMES - 1] = window[1:-1]
        shared = self.body.run(None, {_INPUT: frames[np.newaxis]})[0][0]
        left = self.body.run(None, {_INPUT: np.stack([w[:EDGE_FRAMES] for w in run])})[0]
        right = self.body.run(None, {_INPUT: np.stack([w[WINDOW_FRAMES - EDGE_FRAMES:] for w in run])})[0]
        return window_heads(self.head, _BODY, shared, [o // CELL for o in at], WINDOW_FRAMES // CELL, EDGE_CELLS,
                            left, right, max_windows_per_call)[:, 0]
