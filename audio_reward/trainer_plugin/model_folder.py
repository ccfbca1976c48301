"""Pre-flight of a model folder: is what the run needs really there, before any GPU time is spent?

Used by ``audio-reward preflight`` (the training model, ``actor_rollout_ref.model.path``)
and by the checkpoint evaluation (every checkpoint).  Nothing here loads a
model: it reads ``config.json`` and the safetensors headers only, so it runs
in any environment with ``safetensors`` and takes milliseconds.  The exports write their weights through
:func:`write_safetensors`, readable by others as any file the user writes.

Qwen3-TTS folders come in two shapes:

- the **full model** as released (Qwen3-TTS-12Hz-0.6B-Base): talker, code
  predictor and speaker encoder weights, the 12 Hz speech tokenizer under
  ``speech_tokenizer/``, ``generation_config.json``;
- a **talker-only training export**: verl-omni's Qwen3-TTS actor strips the
  speaker encoder, speech tokenizer and code2wav before training
  (``Qwen3TTSTalkerAdapter.get_strip_modules``), so the Hugging Face folder it
  saves holds ``talker.*`` weights only.  It cannot synthesise on its own; the
  evaluation splices it into the base folder (:mod:`.splice`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

QWEN3_TTS = "qwen3_tts"
SPEAKER_ENCODER_PREFIX = "speaker_encoder."
TALKER_PREFIX = "talker."
# Keys of the talker module itself, when an export was saved from `model.talker` rather than the whole model.
TALKER_MODULE_PREFIXES = ("model.", "codec_head.", "code_predictor.", "text_projection.")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class FolderKind(str, Enum):
    FULL = "full"
    TALKER_ONLY = "talker-only training export"
    OTHER = "other"


@dataclass
class ModelFolder:
    """What a model folder holds, as far as the headers tell."""

    path: Path
    config: dict[str, Any] = field(default_factory=dict)
    weight_files: list[Path] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    @property
    def model_type(self) -> str | None:
        value = self.config.get("model_type")
        return value if isinstance(value, str) else None

    @property
    def is_qwen3_tts(self) -> bool:
        """By ``config.json``'s ``model_type``; by its ``talker.*`` tensors only when the config names no type.

        (Qwen3-Omni has a talker too, so the tensors alone do not tell.)
        """
        if self.model_type is not None:
            return self.model_type == QWEN3_TTS
        return any(k.startswith(TALKER_PREFIX) for k in self.keys)

    @property
    def has_speaker_encoder(self) -> bool:
        return any(k.startswith(SPEAKER_ENCODER_PREFIX) for k in self.keys)

    @property
    def kind(self) -> FolderKind:
        """Full model, talker-only export (talker weights and no speech tokenizer), or not Qwen3-TTS."""
        if not self.is_qwen3_tts:
            return FolderKind.OTHER
        talker_only = bool(self.keys) and all(k.startswith((TALKER_PREFIX, *TALKER_MODULE_PREFIXES)) for k in self.keys)
        if talker_only and not (self.path / "speech_tokenizer").is_dir():
            return FolderKind.TALKER_ONLY
        return FolderKind.FULL


def _umask() -> int:
    """The process's umask: from ``/proc`` where there is one, since setting it to read it races other threads."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_safetensors(tensors: Mapping[str, torch.Tensor], path: Path) -> None:
    """Write ``tensors`` to ``path`` as safetensors, readable as any file the user writes (mode 0666 less umask).

    safetensors writes through a private temporary file and renames it, so the file would keep that file's
    mode, 0600: on a shared cluster nobody but its owner could load the export.
    """
    from safetensors.torch import save_file

    save_file(dict(tensors), str(path), metadata={"format": "pt"})
    os.chmod(path, 0o666 & ~_umask())


def read_config(path: str | Path) -> ModelFolder:
    """The folder with its ``config.json`` read and no weight file opened; each thing wrong becomes one line in
    ``problems``.  What a check that needs only the model's shape reads."""
    raw = str(path)
    folder = ModelFolder(Path(raw).expanduser())
    if not folder.path.exists():
        # ``Qwen/Qwen3-TTS-12Hz-0.6B-Base``: an ``org/name`` that is not a path on this machine
        if _HUB_ID.match(raw) and not raw.startswith((".", "/", "~")):
            folder.problems.append(
                f"{raw} is not a local folder; it looks like a Hugging Face hub id, and nothing is downloaded at run "
                f"time: download it first (huggingface-cli download {raw} --local-dir /models/{raw.split('/')[-1]}) "
                "and pass that folder")
        else:
            folder.problems.append(f"{raw} does not exist")
        return folder
    if not folder.path.is_dir():
        folder.problems.append(f"{raw} is a file, not a model folder")
        return folder
    config = folder.path / "config.json"
    if not config.is_file():
        folder.problems.append(f"{raw} has no config.json: not a Hugging Face model folder")
    else:
        try:
            folder.config = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            folder.problems.append(f"{config} is not readable JSON: {exc}")
        if not isinstance(folder.config, dict):
            folder.problems.append(f"{config} holds no JSON object")
            folder.config = {}
    return folder


def inspect_folder(path: str | Path) -> ModelFolder:
    """:func:`read_config`, then every safetensors header; each thing wrong becomes one line in ``problems``."""
    from safetensors import safe_open

    folder = read_config(path)
    if not folder.path.is_dir():
        return folder
    folder.weight_files = sorted(folder.path.glob("*.safetensors"))
    index = folder.path / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, AttributeError) as exc:
            folder.problems.append(f"{index} is not a readable safetensors index: {exc}")
            shards = []
        folder.problems += [f"{folder.path / s} is named by {index.name} but missing" for s in shards
                            if not (folder.path / s).is_file()]
    if not folder.weight_files:
        folder.problems.append(
            f"{path} holds no .safetensors weights (a verl checkpoint's actor/huggingface folder has only the config: "
            "export the trained weights with audio-reward export-checkpoint RUN/checkpoints/global_step_N "
            "--base BASE_MODEL --out DIR)")
    for weights in folder.weight_files:
        try:
            with safe_open(str(weights), framework="np") as handle:
                folder.keys.update(handle.keys())
        except Exception as exc:  # noqa: BLE001 - safetensors raises SafetensorError, OSError, …
            folder.problems.append(f"{weights} is not a readable safetensors file ({exc}); re-download or re-export it")
    return folder


def training_model_problems(path: str | Path) -> list[str]:
    """Problems of the folder a Qwen3-TTS (or any) training run starts from; empty when it is fine."""
    folder = inspect_folder(path)
    if folder.problems or not folder.is_qwen3_tts:
        return folder.problems
    if folder.kind is FolderKind.TALKER_ONLY:
        return [f"{folder.path} is a {FolderKind.TALKER_ONLY.value} (talker weights only, no speaker encoder or "
                "speech tokenizer): train from the full Qwen3-TTS Base folder"]
    return full_tts_problems(folder)


def full_tts_problems(folder: ModelFolder) -> list[str]:
    """What a full Qwen3-TTS Base folder must hold to clone a voice and decode audio."""
    problems = []
    if not folder.has_speaker_encoder:
        problems.append(f"{folder.path} has no speaker-encoder weights ({SPEAKER_ENCODER_PREFIX}*): the speaker "
                        "embedding needs a Qwen3-TTS Base model (not CustomVoice/VoiceDesign)")
    if folder.config.get("tts_model_type", "base") != "base":
        problems.append(f"{folder.path} is a Qwen3-TTS {folder.config.get('tts_model_type')} model: voice cloning "
                        "from a speaker embedding needs the Base model")
    if not (folder.path / "speech_tokenizer" / "config.json").is_file():
        problems.append(f"{folder.path} has no speech_tokenizer/config.json: the 12 Hz speech tokenizer that turns "
                        "codes into audio is missing")
    if not (folder.path / "generation_config.json").is_file():
        problems.append(f"{folder.path} has no generation_config.json (qwen-tts reads it when loading)")
    return problems


def speaker_width(folder: ModelFolder) -> int | None:
    """Width of the talker's speaker slot (its hidden size), which a speaker embedding must match."""
    talker = folder.config.get("talker_config")
    width = talker.get("hidden_size") if isinstance(talker, dict) else None
    return width if isinstance(width, int) else None
