"""Model folders as the pre-flight reads them: ``config.json`` and real safetensors files, tensors tiny.

The layout of Qwen3-TTS-12Hz-0.6B-Base (``speech_tokenizer/``,
``generation_config.json``, talker and speaker-encoder tensors), or a
talker-only training export (``talker.*`` tensors only).  qwen-tts cannot be
imported beside verl, so the weights are written with safetensors' numpy
API; ``test_eval_checkpoints.py`` checks the same rules on folders qwen-tts
itself saved.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def model_folder(root: Path, *, speaker_encoder: bool = True, talker_only: bool = False,
                 model_type: str = "qwen3_tts") -> Path:
    from safetensors.numpy import save_file

    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"model_type": model_type, "tts_model_type": "base",
                                                  "talker_config": {"hidden_size": 4}}))
    tensors = {"talker.model.layers.0.mlp.up_proj.weight": np.zeros((4, 4), np.float32),
               "talker.codec_head.weight": np.zeros((8, 4), np.float32)}
    if speaker_encoder and not talker_only:
        tensors["speaker_encoder.fc.weight"] = np.zeros((4, 4), np.float32)
    save_file(tensors, str(root / "model.safetensors"))
    if not talker_only:
        (root / "speech_tokenizer").mkdir()
        (root / "speech_tokenizer" / "config.json").write_text("{}")
        (root / "generation_config.json").write_text("{}")
    return root
