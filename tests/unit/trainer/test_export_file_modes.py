"""The export's safetensors file is as readable as any file the user writes (issue 40, finding 6).

safetensors writes through a private temporary file (mode 0600) and renames it; on a shared cluster another
user could not load the export although every other file of the folder is 0644.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from audio_reward.trainer_plugin.model_folder import write_safetensors  # noqa: E402


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_weights_take_the_mode_a_plain_write_gets(tmp_path: Path, mask: int, umask: None) -> None:
    os.umask(mask)
    write_safetensors({"w": torch.zeros(3)}, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text("{}")
    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in tmp_path.iterdir()}
    assert modes["model.safetensors"] == modes["config.json"] == 0o666 & ~mask, {k: oct(v) for k, v in modes.items()}
