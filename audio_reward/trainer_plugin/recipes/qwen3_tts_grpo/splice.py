"""Splice a talker-only training export into its base Qwen3-TTS folder, so the trained talker can synthesise.

verl-omni's Qwen3-TTS actor trains ``talker.model.*`` and ``talker.codec_head.*``
and saves the talker without the speaker encoder, speech tokenizer and
code2wav.  :func:`splice_talker` writes a folder that is the base model with
every tensor the export holds put in place of the base's (its own dtype
kept, shapes checked), and links the rest of the base folder (config, text
tokenizer, ``speech_tokenizer/``, ``generation_config.json``) beside it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...model_folder import TALKER_PREFIX, FolderKind, ModelFolder, write_safetensors

if TYPE_CHECKING:
    import torch

SPLICE_JSON = "splice.json"


class SpliceError(ValueError):
    """The export does not fit the base model (a tensor it lacks, or of another shape)."""


@dataclass(frozen=True)
class SpliceReport:
    base: str
    export: str
    replaced: int
    """Base tensors replaced by the export's."""
    kept: int
    """Base tensors kept as they were (speaker encoder, and any talker tensor the export did not save)."""


def _load(files: Sequence[Path]) -> dict[str, torch.Tensor]:
    """Every tensor of the safetensors ``files`` (a later file's tensor wins a repeated key)."""
    from safetensors.torch import load_file

    return {key: tensor for weights in files for key, tensor in load_file(str(weights)).items()}


def splice_talker(base: ModelFolder, export: ModelFolder, out: Path) -> SpliceReport:
    """Write base + the export's talker tensors into ``out``; reuse ``out`` when it already holds this splice."""
    return splice_tensors(base, lambda: _load(export.weight_files), out, export.path)


def splice_tensors(base: ModelFolder, tensors: Callable[[], Mapping[str, torch.Tensor]], out: Path,
                   source: Path) -> SpliceReport:
    """Write ``base`` with ``tensors()`` in place of its own into ``out`` (reused when it holds this splice).

    A key of the talker module itself (``model.…``) is put under ``talker.``.
    Each tensor keeps its dtype, so the folder holds the trained values
    exactly (a float32 training run over a bfloat16 base stays float32; the
    loader casts to the dtype it is asked for).  ``source`` names the
    trained weights in the report.
    """
    if base.kind is not FolderKind.FULL:
        raise SpliceError(f"{base.path} is not a full Qwen3-TTS folder (model_type {base.model_type!r}), so it cannot "
                          "take a talker-only export")
    done = out / SPLICE_JSON
    if done.is_file():
        report = SpliceReport(**json.loads(done.read_text(encoding="utf-8")))
        if (report.base, report.export) == (str(base.path.resolve()), str(source.resolve())):
            return report
    merged = _load(base.weight_files)
    trained = tensors()
    for key, tensor in trained.items():
        target = key if key.startswith(TALKER_PREFIX) else TALKER_PREFIX + key
        if target not in merged:
            raise SpliceError(f"{source}: tensor {key} has no counterpart {target} in {base.path}; "
                              "is it from a model of another size?")
        if tuple(tensor.shape) != tuple(merged[target].shape):
            raise SpliceError(f"{source}: {key} has shape {tuple(tensor.shape)}, the base's {target} "
                              f"{tuple(merged[target].shape)}")
        merged[target] = tensor.contiguous()
    out.mkdir(parents=True, exist_ok=True)
    for entry in base.path.iterdir():
        if entry.suffix == ".safetensors" or entry.name == "model.safetensors.index.json":
            continue
        link = out / entry.name
        link.unlink(missing_ok=True)
        os.symlink(entry.resolve(), link)
    for stale in out.glob("*.safetensors"):
        stale.unlink()
    write_safetensors(merged, out / "model.safetensors")
    report = SpliceReport(str(base.path.resolve()), str(source.resolve()), len(trained), len(merged) - len(trained))
    done.write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
    return report
