"""``audio-reward export-checkpoint`` on a LoRA thinker checkpoint written by verl's own ``FSDPCheckpointManager``.

A tiny random Qwen3-Omni thinker (transformers' own config and model classes)
gets the thinker recipe's LoRA layout through peft (q/k/v/o projections, the
audio and vision encoders excluded by the recipe's pattern), a trained-looking
adapter, FSDP2 on two CPU ranks (gloo; the recipe's ``strategy=fsdp2``) and
verl 0.9.1's save.  The export merges each adapter into its weight and must
equal peft's own ``merge_and_unload``, bit for bit, in a folder the thinker
class loads.  Runs in the trainer environment (verl, peft, transformers 5).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("peft")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers.models.qwen3_omni_moe")

from safetensors.torch import load_file  # noqa: E402

from audio_reward.cli import main as cli  # noqa: E402
from audio_reward.trainer_plugin.checkpoint_export import EXPORT_JSON  # noqa: E402
from audio_reward.trainer_plugin.recipes.overrides import THINKER_LORA_EXCLUDE  # noqa: E402
from tests.testkit.verl_checkpoint import LORA_REFERENCE, write_lora_checkpoint  # noqa: E402


@pytest.fixture(autouse=True)
def _umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_lora_checkpoint_exports_merged_like_peft(tmp_path: Path) -> None:
    from transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe import (
        Qwen3OmniMoeThinkerForConditionalGeneration,
    )

    step = write_lora_checkpoint(tmp_path / "checkpoints", 2, THINKER_LORA_EXCLUDE)
    meta = json.loads((step / "actor" / "lora_train_meta.json").read_text())
    assert (meta["r"], meta["lora_alpha"]) == (4, 8)
    out = tmp_path / "merged"
    assert cli(["export-checkpoint", str(step), "--out", str(out)]) == 0
    reference = load_file(str(step.parent / LORA_REFERENCE))
    exported = load_file(str(out / "model.safetensors"))
    assert set(exported) == set(reference) and not any("lora_" in k or "base_layer" in k for k in exported)
    for key, tensor in reference.items():
        assert exported[key].dtype == tensor.dtype and torch.equal(exported[key], tensor), key
    # Issue 40, finding 6: the weights are as readable as the folder's other files (umask 022 here: 0644).
    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in out.iterdir()}
    assert modes["model.safetensors"] == modes[EXPORT_JSON] == 0o644, modes
    report = json.loads((out / EXPORT_JSON).read_text())
    assert report["lora_merged"] == 4 and report["world_size"] == 2  # q/k/v/o of the one text layer only
    loaded = Qwen3OmniMoeThinkerForConditionalGeneration.from_pretrained(str(out)).state_dict()
    assert all(torch.equal(loaded[k], reference[k]) for k in reference)
