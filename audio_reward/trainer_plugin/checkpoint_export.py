"""``audio-reward export-checkpoint``: a verl actor checkpoint as a model folder that loads for evaluation.

    audio-reward export-checkpoint outputs/qwen3_tts_grpo/checkpoints/global_step_500 \\
        --base /models/Qwen3-TTS-12Hz-0.6B-Base --out exports/step500

What verl's ``FSDPCheckpointManager`` writes under ``global_step_N/actor/``
(``trainer.default_local_dir``): one ``model_world_size_W_rank_R.pt`` per
rank, a ``torch.save`` of the FSDP *sharded* state dict (a DTensor per
parameter, sharded on dim 0 over the ``fsdp`` mesh; a ShardedTensor where
FSDP ran without a mesh), ``fsdp_config.json`` (``world_size``), and
``huggingface/`` with the config and tokenizer only.  verl's own
``model_merger`` cannot turn a Qwen3-TTS run into weights: it loads the
config with ``AutoConfig``, which knows no ``qwen3_tts`` in the merger's
process, and maps every ``*ForConditionalGeneration`` to the vision-to-text
auto class, which Qwen3-TTS is not (the same mapping makes
``checkpoint.save_contents=[hf_model]`` fail at the first save); it also
casts every tensor to bfloat16.

This export reassembles each tensor from the rank files in its saved dtype,
so the folder holds exactly the trained values, and needs torch and
safetensors only (no verl, no model class): it runs in the trainer or the TTS
environment.  verl-omni's Qwen3-TTS actor trains the model with its speaker
encoder, speech tokenizer and code2wav removed, so the checkpoint holds the
talker only.  With ``--base`` the trained tensors are spliced into the Base
folder, which gives a folder ``qwen_tts`` loads and that synthesises;
without it the folder holds the trained tensors and the checkpoint's
``huggingface/`` files (a talker-only export, which the checkpoint
evaluation recognises and splices itself).

A LoRA run (the Qwen3-Omni thinker recipe) saves the PEFT-wrapped model:
``…base_layer.weight`` with ``…lora_A/B.default.weight`` beside it, and
``lora_train_meta.json`` with the rank and alpha.  The export merges each
adapter into its weight, ``W + alpha / r · B @ A``, and writes plain keys, so
the folder loads as the base architecture does.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

FSDP_CONFIG = "fsdp_config.json"
HF_DIR = "huggingface"
TRACKER = "latest_checkpointed_iteration.txt"
"""verl's record of the last saved step, in ``trainer.default_local_dir``."""
LORA_META = "lora_train_meta.json"
EXPORT_JSON = "export.json"
_PEFT_PREFIX = "base_model.model."


class ExportError(ValueError):
    """The checkpoint cannot be exported: a file missing, shards that disagree, an adapter without its weight."""


@dataclass(frozen=True)
class ActorCheckpoint:
    """One saved actor: ``global_step_N/actor``."""

    path: Path
    world_size: int
    step: int | None

    @property
    def rank_files(self) -> list[Path]:
        return [self.path / f"model_world_size_{self.world_size}_rank_{r}.pt" for r in range(self.world_size)]


@dataclass
class ExportReport:
    checkpoint: str
    step: int | None
    world_size: int
    tensors: int
    dtypes: dict[str, int]
    lora_merged: int = 0
    base: str | None = None
    replaced: int | None = None
    kept: int | None = None
    out: str = ""
    notes: list[str] = field(default_factory=list)


def latest_step(checkpoints: Path) -> Path | None:
    """``global_step_N`` of the last step verl saved in ``checkpoints`` (by its :data:`TRACKER`), or None."""
    tracker = checkpoints / TRACKER
    if not tracker.is_file():
        return None
    return checkpoints / f"global_step_{tracker.read_text(encoding='utf-8').strip()}"


def find_actor_checkpoint(path: str | Path) -> ActorCheckpoint:
    """The actor checkpoint at ``path``: ``global_step_N``, its ``actor/``, or the run's checkpoint folder (latest)."""
    root = Path(path).expanduser()
    if not root.exists():
        raise ExportError(f"{root} does not exist")
    root = latest_step(root) or root
    if (root / "actor").is_dir():
        root = root / "actor"
    config = root / FSDP_CONFIG
    if not config.is_file():
        raise ExportError(f"{root} holds no {FSDP_CONFIG}: not an FSDP actor checkpoint of verl (give "
                          "RUN/checkpoints/global_step_N, written with trainer.save_freq > 0)")
    try:
        world = int(json.loads(config.read_text(encoding="utf-8"))["world_size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ExportError(f"{config} is not readable: {exc}") from None
    step_name = root.parent.name if root.name == "actor" else root.name
    step = int(step_name.rpartition("_")[2]) if step_name.startswith("global_step_") else None
    ckpt = ActorCheckpoint(root, world, step)
    if missing := [p.name for p in ckpt.rank_files if not p.is_file()]:
        raise ExportError(f"{root} lacks {', '.join(missing)} of a world-size-{world} checkpoint "
                          "(saved with checkpoint.save_contents without 'model', or copied partly)")
    return ckpt


def _rank_order(tensor: Any) -> tuple[list[int], int | None]:
    """The ranks whose local pieces make the whole DTensor, in order, and the dim they are cut along."""
    mesh = tensor.device_mesh.mesh
    index: list[Any] = []
    dim = None
    for placement in tensor.placements:
        if placement.is_replicate():
            index.append(0)
        elif placement.is_shard() and dim is None:
            index.append(slice(None))
            dim = placement.dim
        else:
            raise ExportError(f"placement {tensor.placements} is not supported (one sharded mesh dimension at most)")
    return [int(r) for r in mesh[tuple(index)].reshape(-1).tolist()], dim


def _merge(key: str, pieces: Sequence[Any]) -> torch.Tensor:
    import torch
    from torch.distributed.tensor import DTensor

    first = pieces[0]
    if isinstance(first, DTensor):
        ranks, dim = _rank_order(first)
        locals_ = [pieces[r].to_local() for r in ranks]
        whole = locals_[0] if dim is None else torch.cat(locals_, dim=dim)
        if tuple(whole.shape) != tuple(first.shape):
            raise ExportError(f"{key}: the rank pieces make shape {tuple(whole.shape)}, the tensor is "
                              f"{tuple(first.shape)}")
        return whole.contiguous()
    if hasattr(first, "local_shards") and hasattr(first, "metadata"):  # ShardedTensor: FSDP without a device mesh
        whole = torch.empty(tuple(first.metadata().size), dtype=first.local_shards()[0].tensor.dtype)
        for piece in pieces:
            for shard in piece.local_shards():
                where = tuple(slice(o, o + n) for o, n in zip(shard.metadata.shard_offsets,
                                                             shard.metadata.shard_sizes, strict=True))
                whole[where] = shard.tensor
        return whole
    for rank, piece in enumerate(pieces[1:], start=1):
        if not torch.equal(piece, first):
            raise ExportError(f"{key} is a plain tensor that differs between rank 0 and rank {rank}; a replicated "
                              "tensor must be equal on every rank")
    return first.contiguous()


def load_state_dict(ckpt: ActorCheckpoint) -> dict[str, torch.Tensor]:
    """The whole trained state dict, each tensor in the dtype it was saved in."""
    import torch

    shards = [torch.load(p, map_location="cpu", weights_only=False) for p in ckpt.rank_files]
    keys = set(shards[0])
    for rank, shard in enumerate(shards[1:], start=1):
        if set(shard) != keys:
            raise ExportError(f"rank {rank} of {ckpt.path} holds other tensors than rank 0: not one checkpoint")
    return {key: _merge(key, [s[key] for s in shards]) for key in sorted(keys)}


def merge_lora(state: Mapping[str, torch.Tensor], scale: float) -> tuple[dict[str, torch.Tensor], int]:
    """PEFT keys to plain ones, each ``lora_A``/``lora_B`` pair added into its ``base_layer`` weight."""
    out: dict[str, torch.Tensor] = {}
    adapters: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in state.items():
        plain = key.removeprefix(_PEFT_PREFIX)
        if part := next((p for p in ("lora_A", "lora_B") if f".{p}." in plain), None):
            adapters.setdefault(plain.split(f".{part}.")[0], {})[part] = tensor
        else:
            out[plain.replace(".base_layer.", ".")] = tensor
    for module, pair in adapters.items():
        weight = f"{module}.weight"
        if weight not in out or set(pair) != {"lora_A", "lora_B"}:
            raise ExportError(f"LoRA adapter of {module} has no {weight} or lacks lora_A/lora_B: a LoRA-only "
                              "checkpoint (save_lora_only) cannot be merged without its base weights")
        delta = (pair["lora_B"].float() @ pair["lora_A"].float()) * scale
        out[weight] = (out[weight].float() + delta).to(out[weight].dtype)
    return out, len(adapters)


def _lora_scale(ckpt: ActorCheckpoint) -> float:
    meta = ckpt.path / LORA_META
    if not meta.is_file():
        raise ExportError(f"{ckpt.path} holds LoRA adapters but no {LORA_META} (rank and alpha)")
    saved = json.loads(meta.read_text(encoding="utf-8"))
    return float(saved["lora_alpha"]) / float(saved["r"])


def export_checkpoint(checkpoint: str | Path, out: Path, base: Path | None = None) -> ExportReport:
    """Write the checkpoint's weights as a model folder at ``out``; spliced into ``base`` when given."""
    # torch and safetensors before the folder: where they are missing, that is what the user must hear
    import safetensors.torch  # noqa: F401

    from .model_folder import inspect_folder, write_safetensors

    ckpt = find_actor_checkpoint(checkpoint)
    state = load_state_dict(ckpt)
    merged = 0
    if any(".lora_A." in k for k in state):
        state, merged = merge_lora(state, _lora_scale(ckpt))
    dtypes = dict(Counter(str(t.dtype).removeprefix("torch.") for t in state.values()))
    report = ExportReport(str(ckpt.path), ckpt.step, ckpt.world_size, len(state), dtypes, merged, out=str(out))
    if base is not None:
        from .recipes.qwen3_tts_grpo.splice import splice_tensors

        folder = inspect_folder(base)
        if folder.problems:
            raise ExportError("; ".join(folder.problems))
        spliced = splice_tensors(folder, lambda: state, out, ckpt.path)
        report.base, report.replaced, report.kept = str(folder.path), spliced.replaced, spliced.kept
    else:
        out.mkdir(parents=True, exist_ok=True)
        hf = ckpt.path / HF_DIR
        for entry in sorted(hf.iterdir()) if hf.is_dir() else []:
            if entry.is_file():
                shutil.copy2(entry, out / entry.name)
        if not (out / "config.json").is_file():
            report.notes.append(f"{hf} holds no config.json; the folder has weights only")
        write_safetensors(state, out / "model.safetensors")
    (out / EXPORT_JSON).write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
    return report


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export-checkpoint",
        help="turn a verl actor checkpoint (global_step_N) into a model folder for evaluation",
        description="Reassemble the FSDP rank files of a verl actor checkpoint into one safetensors file, in "
                    "the dtype trained. With --base (the full Qwen3-TTS Base folder the run started from), the "
                    "trained talker is spliced into it: a folder qwen_tts loads and synthesises with. LoRA "
                    "adapters are merged into their weights.",
    )
    p.add_argument("checkpoint", help="RUN/checkpoints/global_step_N (or its actor/, or RUN/checkpoints for the "
                                      "latest step)")
    p.add_argument("--out", required=True, type=Path, help="model folder to write")
    p.add_argument("--base", type=Path, default=None,
                   help="full base model folder to splice the trained tensors into (Qwen3-TTS)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import sys

    try:
        report = export_checkpoint(args.checkpoint, args.out, args.base)
    except ModuleNotFoundError as exc:
        print(f"error: {exc.name} is not installed here; export-checkpoint needs torch and safetensors "
              "(the trainer or the TTS environment)", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:  # ExportError, and the splice's SpliceError
        print(f"error: {exc}", file=sys.stderr)
        return 1
    what = (f"spliced {report.replaced} trained tensors into {report.base} ({report.kept} kept)"
            if report.base else f"{report.tensors} tensors")
    print(f"exported step {report.step} ({report.world_size} rank file(s)) to {args.out}: {what}")
    return 0
