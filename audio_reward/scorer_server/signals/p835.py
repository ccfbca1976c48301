"""DNSMOS's P.835 model cut in four, so that the overlapping windows of a clip share its convolutions.

speechmos runs the whole ``sig_bak_ovr.onnx`` model once per 9.01 s window, and a clip's windows start 1 s
apart, so a 4 s clip (doubled to 16 s) has 7 windows that cover each second up to 7 times.  The model:

1. frames its 144,160 samples (320 samples, hop 160: 900 frames) and takes each frame's log power spectrum
   (161 bins): the *spectrogram*;
2. runs four 3×3 convolutions with zero padding and a 2×2 max pool at full resolution: the *trunk*, about
   93 % of the model's time;
3. one more convolution and pool at half resolution: the *neck*, about 3 %;
4. two more convolutions at lower resolution, a global max pool and dense layers: the *head*.

Windows start 100 frames apart, on the frame grid and on the grid of the neck's output cells (4 frames). So
each layer of the trunk and the neck computes, inside a window, what it computes at the same place in the
whole clip, except at the window's edges, where its zero padding stands in for the clip's neighbouring
frames: the trunk's first and last :data:`HALO` frames, and the neck's first and last :data:`EDGE_CELLS`
cells. Those are computed again from the window's own edges.  The spectrogram, the trunk (in segments, so a
long clip's activations stay bounded) and the neck run once over the clip, the head once per window.

A clip under 9.01 s is doubled until it fills a window, so it repeats. When a whole number of its copies
spans a whole number of frames (160 samples), the trunk's convolutions repeat with it, and run over one
period only (then the trunk's pool over the whole clip): Qwen3-TTS's clips, 1920 samples at 24 kHz (1280 at
16 kHz) a codec frame, repeat every copy.
Either way, on onnxruntime's CPU provider the outputs equal the whole model's window by window, bit for bit
where measured (tests/integration/engines/test_signal_models.py allows 1e-5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .windows import open_parts, window_heads

WINDOW_SAMPLES = 144_160
"""The model's input: speechmos's 9.01 s at 16 kHz."""
HOP, FRAMES = 160, 900
"""The spectrogram's hop (samples) and the frames of one window."""
HALO = 4
"""Spectrogram frames on each side that a trunk output frame depends on (its four 3×3 convolutions)."""
CELL = 4
"""Spectrogram frames in one cell of the neck's output (two 2×2 pools)."""
EDGE_CELLS, EDGE_HALF_FRAMES = 2, 8
"""A window's first and last 2 neck cells see its zero padding. Each depends on the trunk's output from one
half-resolution frame before it to two after it, so the window's first or last 8 such frames give them."""
SEGMENT_FRAMES = 1800
"""Frames of the clip the trunk takes in one call (activations: 128 channels × 161 bins × 4 B a frame)."""
MAX_SHARED_WINDOWS = 32
"""Windows that share one pass over the clip (40 s of it): a longer clip goes in such runs, so that its
activations stay bounded (about 10 MB a second of clip)."""

_SPECTROGRAM = "adjusted_input6"  # (N, 1, frames, 161): the log power spectrum the first convolution takes
_CONVOLVED = "mos_estimator_logpow/conv2d_3/Relu:0"  # (N, 32, frames, 161): the trunk before its pool
_POOLED = "mos_estimator_logpow/conv2d_3/Relu:0_pooling0"  # (N, 32, frames / 2, 80): the trunk's max pool
_NECK = "mos_estimator_logpow/max_pooling2d/MaxPool_1_conv0"  # (N, 32, frames / 4, 40): the neck's
_INPUT, _OUTPUT = "input_1", "Identity:0"


def repeat_period(length: int, copies: int) -> int | None:
    """The shortest shift, in samples, that maps ``copies`` copies of a ``length``-sample clip onto themselves
    and spectrogram frames (160 samples) onto frames; None when no shift under the copies' length does."""
    shift = length
    while shift < length * copies:
        if shift % HOP == 0:
            return shift
        shift *= 2
    return None


def _repeat(values: np.ndarray, lead: int, period: int, length: int) -> np.ndarray:
    """``values`` (channels, time, ...) continued to ``length`` steps: after its first ``lead`` steps, the next
    ``period`` repeat."""
    parts = [values[:, :min(length, lead + period)]]
    done = parts[0].shape[1]
    while done < length:
        take = min(period, length - done)
        parts.append(values[:, lead:lead + take])
        done += take
    return np.concatenate(parts, axis=1)


@dataclass
class SharedWindowP835:
    """The four parts of the P.835 model, as onnxruntime sessions; see the module docstring."""

    spectrogram: Any
    """(N, 144160) samples -> (N, 1, 900, 161)."""
    trunk: Any
    """(N, 1, frames, 161) -> (N, 32, frames / 2, 80), for any even number of frames."""
    convolutions: Any
    """The trunk without its pool: (N, 1, frames, 161) -> (N, 32, frames, 161)."""
    neck: Any
    """(N, 32, half, 80) -> (N, 32, half / 2, 40), for any even number of half-resolution frames."""
    head: Any
    """(N, 32, 225, 40) -> (N, 3): the raw SIG, BAK and OVRL before speechmos's calibration."""

    @classmethod
    def load(cls, path: str, options: Any, providers: list[str]) -> SharedWindowP835:
        """Cut the model file at ``path`` and open each part with these onnxruntime options and providers."""
        return cls(*open_parts(path, [
            (_INPUT, _SPECTROGRAM, (["N", WINDOW_SAMPLES], ["N", 1, FRAMES, 161])),
            (_SPECTROGRAM, _POOLED, (["N", 1, "frames", 161], ["N", 32, "pooled", 80])),
            (_SPECTROGRAM, _CONVOLVED, (["N", 1, "frames", 161], ["N", 32, "frames", 161])),
            (_POOLED, _NECK, (["N", 32, "half", 80], ["N", 32, "quarter", 40])),
            (_NECK, _OUTPUT, (["N", 32, FRAMES // CELL, 40], ["N", 3]))], options, providers))

    def _spectrogram(self, clip: np.ndarray, frames: int) -> np.ndarray:
        """The clip's first ``frames`` spectrogram frames, (1, 1, frames, 161), from the model's own STFT part
        run on 900-frame pieces of the clip (zero-padded past its end: those frames are not used)."""
        pieces = -(-frames // FRAMES)
        padded = np.zeros(pieces * FRAMES * HOP + WINDOW_SAMPLES - FRAMES * HOP, dtype=np.float32)
        used = min(len(clip), len(padded))
        padded[:used] = clip[:used]
        batch = np.stack([padded[i * FRAMES * HOP:i * FRAMES * HOP + WINDOW_SAMPLES] for i in range(pieces)])
        spectra = self.spectrogram.run(None, {_INPUT: batch})[0]  # (pieces, 1, 900, 161)
        return np.ascontiguousarray(np.concatenate(list(spectra), axis=1)[np.newaxis, :, :frames])

    def _trunk(self, spectrum: np.ndarray, period: int | None) -> np.ndarray:
        """The trunk over the whole clip, (32, frames / 2, 80); over one period of it and repeated, when the
        clip repeats every ``period`` samples (:func:`repeat_period`)."""
        frames = spectrum.shape[2]
        period_frames = frames if period is None else period // HOP
        if period_frames + 2 * HALO >= frames:
            return self._segments(spectrum)
        # A value is the same one period on, except in the first HALO frames, whose inputs reach the zero
        # padding before the clip; the base covers those and one period beyond them.
        end = period_frames + 2 * HALO
        if period_frames % 2 == 0:  # the pool's cells repeat too: repeat the pooled base
            lead, cells = HALO // 2, period_frames // 2
            return _repeat(self._segments(spectrum[:, :, :end]), lead, cells, frames // 2)
        convolved = _repeat(self.convolutions.run(None, {_SPECTROGRAM: spectrum[:, :, :end]})[0][0], HALO,
                            period_frames, frames)
        rows, columns = frames // 2, convolved.shape[2] // 2  # the trunk's 2×2 max pool: no padding
        pooled = convolved[:, 0:2 * rows:2, 0:2 * columns:2].copy()
        for row, column in ((0, 1), (1, 0), (1, 1)):
            np.maximum(pooled, convolved[:, row:2 * rows:2, column:2 * columns:2], out=pooled)
        return pooled

    def _segments(self, spectrum: np.ndarray) -> np.ndarray:
        """The trunk over ``spectrum``, (32, frames / 2, 80), in segments of :data:`SEGMENT_FRAMES`, each run
        with :data:`HALO` frames of its neighbours so that its own frames come out as in one call."""
        frames = spectrum.shape[2]
        pooled = []
        for start in range(0, frames, SEGMENT_FRAMES):
            end = min(start + SEGMENT_FRAMES, frames)
            low, high = max(0, start - HALO), min(frames, end + HALO)
            out = self.trunk.run(None, {_SPECTROGRAM: spectrum[:, :, low:high]})[0][0]
            pooled.append(out[:, (start - low) // 2:(end - low) // 2])
        return np.concatenate(pooled, axis=1)

    def window_scores(self, clip: np.ndarray, starts: Sequence[int], max_windows_per_call: int,
                      period: int | None = None) -> np.ndarray:
        """The model's raw (SIG, BAK, OVRL) of each window ``clip[start:start + 144160]``, (len(starts), 3).

        ``starts`` are multiples of 640 samples (speechmos's are of 16,000), each window inside ``clip``;
        ``period``, if given, a multiple of 160 samples after which ``clip`` repeats itself.
        """
        if not starts:
            return np.zeros((0, 3), dtype=np.float32)
        if any(start % (CELL * HOP) for start in starts):
            raise ValueError(f"a window must start on a cell of the neck (a multiple of {CELL * HOP} samples)")
        if period is not None and (period % HOP or not np.array_equal(clip[period:], clip[:-period])):
            raise ValueError(f"the clip does not repeat every {period} samples on the frames' grid")
        if len(starts) > MAX_SHARED_WINDOWS:
            return np.concatenate([self.window_scores(clip, starts[i:i + MAX_SHARED_WINDOWS], max_windows_per_call)
                                   for i in range(0, len(starts), MAX_SHARED_WINDOWS)])
        origin = starts[0]  # the run's windows share the clip from its first one on
        clip = clip[origin:]
        offsets = [(start - origin) // HOP for start in starts]
        spectrum = self._spectrogram(clip, offsets[-1] + FRAMES)
        trunk = self._trunk(spectrum, period)
        shared = self.neck.run(None, {_POOLED: trunk[np.newaxis]})[0][0]
        count, halo_half, span = len(offsets), HALO // 2, EDGE_HALF_FRAMES
        pieces = np.stack([spectrum[0, :, o:o + 2 * HALO] for o in offsets]
                          + [spectrum[0, :, o + FRAMES - 2 * HALO:o + FRAMES] for o in offsets])
        trunk_edges = self.trunk.run(None, {_SPECTROGRAM: pieces})[0]  # (2 windows, 32, HALO, 80)
        necks = []
        for i, o in enumerate(offsets):  # each window's first half-resolution frames, its own edge in front
            left = trunk[:, o // 2:o // 2 + span].copy()
            left[:, :halo_half] = trunk_edges[i, :, :halo_half]
            necks.append(left)
        for i, o in enumerate(offsets):  # and its last, its own edge behind
            right = trunk[:, (o + FRAMES) // 2 - span:(o + FRAMES) // 2].copy()
            right[:, span - halo_half:] = trunk_edges[count + i, :, HALO - halo_half:]
            necks.append(right)
        edge = self.neck.run(None, {_POOLED: np.stack(necks)})[0]  # (2 windows, 32, span / 2, 40)
        return window_heads(self.head, _NECK, shared, [o // CELL for o in offsets], FRAMES // CELL, EDGE_CELLS,
                            edge[:count], edge[count:], max_windows_per_call)
