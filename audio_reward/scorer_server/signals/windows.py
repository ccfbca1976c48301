"""The pieces DNSMOS's window sharing is built of (:mod:`.p835`, :mod:`.p808`): an ONNX model cut into parts,
a model's last part run per window over activations the windows share, and the whole model run per window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import import_backend


def cut_model(model: Any, start: str, end: str, shapes: tuple[list[Any], list[Any]]) -> bytes:
    """The part of the ONNX ``model`` from tensor ``start`` to tensor ``end``, its input and output of the given
    shapes (a string is a dimension named, not fixed), serialised for onnxruntime."""
    onnx = import_backend("onnx", "the DNSMOS quality model")
    part = onnx.utils.Extractor(model).extract_model([start], [end])
    del part.graph.value_info[:]  # the whole model's shapes fix the frame count, which the parts leave free
    for value, dims in zip((part.graph.input[0], part.graph.output[0]), shapes, strict=True):
        shape = value.type.tensor_type.shape
        del shape.dim[:]
        for size in dims:
            dim = shape.dim.add()
            if isinstance(size, str):
                dim.dim_param = size
            else:
                dim.dim_value = size
    onnx.checker.check_model(part)
    return bytes(part.SerializeToString())


def open_parts(path: str, cuts: Sequence[tuple[str, str, tuple[list[Any], list[Any]]]], options: Any,
               providers: list[str]) -> list[Any]:
    """The ONNX model at ``path`` cut into parts (each ``(start, end, shapes)`` as :func:`cut_model` takes them),
    each opened as an onnxruntime session with these options and providers."""
    onnx = import_backend("onnx", "the DNSMOS quality model")  # its import brings shape_inference
    import onnxruntime as ort

    model = onnx.shape_inference.infer_shapes(onnx.load(path))
    return [ort.InferenceSession(cut_model(model, *cut), options, providers=providers) for cut in cuts]


def window_heads(head: Any, name: str, shared: np.ndarray, starts: Sequence[int], cells: int, edge_cells: int,
                 left: np.ndarray, right: np.ndarray, max_windows_per_call: int) -> np.ndarray:
    """``head`` (an onnxruntime session taking ``name``) over each window, in calls of at most
    ``max_windows_per_call`` windows, one output row per window.

    Window ``i`` is ``shared[:, starts[i]:starts[i] + cells]`` (the clip's activations, channels first), but
    its first ``edge_cells`` come from ``left[i]`` and its last from ``right[i]``: the same activations
    computed from the window's own edges.
    """
    out = []
    for first in range(0, len(starts), max_windows_per_call):
        chosen = range(first, min(first + max_windows_per_call, len(starts)))
        windows = np.stack([shared[:, starts[i]:starts[i] + cells] for i in chosen])
        for row, i in enumerate(chosen):
            windows[row, :, :edge_cells] = left[i, :, :edge_cells]
            windows[row, :, cells - edge_cells:] = right[i, :, right.shape[2] - edge_cells:]
        out.append(head.run(None, {name: windows})[0])
    return np.concatenate(out)


@dataclass
class WholeModel:
    """An ONNX model run whole on each window, as speechmos runs it: the reference the shared parts are checked
    against, and the path for a device or a model file they were not checked on."""

    session: Any
    """An onnxruntime session whose one input takes a batch of windows."""

    def window_scores(self, windows: Sequence[np.ndarray], max_windows_per_call: int) -> np.ndarray:
        """The model's output for each window, in calls of at most ``max_windows_per_call`` windows."""
        name = self.session.get_inputs()[0].name
        return np.concatenate([self.session.run(None, {name: np.stack(windows[i:i + max_windows_per_call])})[0]
                               for i in range(0, len(windows), max_windows_per_call)])
