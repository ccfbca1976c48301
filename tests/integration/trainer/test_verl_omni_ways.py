"""Ways (b) and (c) of docs/training.md against verl-omni's real code, scored by a real scorer on loopback.

(b) verl-omni's ``AudioRewardManager``, loaded by verl's own ``load_reward_manager``
    from the checkout, calls our ``reward_fn.compute_score`` on a rollout shaped
    as the v1 agent loop hands it over (``tool_extra_fields`` with a float
    waveform tensor and an int ``audio_sample_rate`` of 24000).
(c) verl-omni's ``audio_http_scorer_client.compute_score``, unchanged, posts to
    ``audio-reward serve``'s ``/score``: nothing of ours on the trainer side.

The files come from ``VERL_OMNI_SRC`` (a verl-omni checkout with its Qwen3-TTS
GRPO example); the tests skip with that reason where it has none. verl-omni's
package ``__init__`` imports diffusers and vLLM, which do not install on a CPU
machine, so its parent packages are set up as plain namespaces over the
checkout's folders and only the modules under test (and what they import)
are executed.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.testkit.speech import synth_speech

TEXT = "Please call Stella and ask her to bring these things."
WRONG = "Completely different words were spoken here today."
SOURCE = Path(os.environ.get("VERL_OMNI_SRC", "/nonexistent"))


def peer_module(name: str) -> Any:
    """Import verl-omni's module ``name`` from the checkout, skipping its package ``__init__`` files."""
    relpath = Path(*name.split(".")).with_suffix(".py")
    if not (SOURCE / relpath).is_file():
        pytest.skip(f"VERL_OMNI_SRC={SOURCE} has no {relpath} (verl-omni's Qwen3-TTS GRPO example, "
                    "github verl-project/verl-omni PR #428, is not in that checkout)")
    parts = name.split(".")
    for i in range(1, len(parts)):
        package = ".".join(parts[:i])
        if package not in sys.modules:
            module = types.ModuleType(package)
            module.__path__ = [str(SOURCE.joinpath(*parts[:i]))]
            sys.modules[package] = module
    return importlib.import_module(name)


def test_c_verl_omni_client_unchanged_against_our_score_path(scorer_url: str) -> None:
    client = peer_module("verl_omni.utils.reward_score.audio_http_scorer_client")
    wave, rate = synth_speech(TEXT)
    wrong, _ = synth_speech(WRONG)

    async def score(audio: np.ndarray) -> dict[str, Any]:
        # verl-omni's example: SCORER_URL=http://scorer-host:18080/score
        return await client.compute_score((audio, rate), TEXT, {"id": "row-7", "split": "val", "audio": audio},
                                          "tts", server_url=f"{scorer_url}/score", timeout=60.0, max_retries=0)

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        try:
            return await score(wave), await score(wrong)
        finally:
            await client.compute_score._session.close()

    good, bad = asyncio.run(both())
    # its client accepted the answers: finite score, flat scalar diagnostics
    assert good["score"] > 0.9 and good["cer"] < 0.1 and bad["score"] < good["score"] - 0.3
    assert isinstance(good["transcript"], str) and good["protocol_version"] == "1"


def test_b_verl_omni_manager_with_our_compute_score(scorer_url: str, tmp_path: Path) -> None:
    pytest.importorskip("verl")
    torch = pytest.importorskip("torch")
    peer_module("verl_omni.reward_loop.reward_manager.audio")
    import verl
    from hydra import compose, initialize_config_dir
    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager

    from audio_reward.trainer_plugin.verl_omni_score import close_cached_clients

    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=[
            # the launch lines of way (b) in docs/training.md
            "reward.reward_manager.source=importlib",
            "reward.reward_manager.module.path=pkg://verl_omni.reward_loop.reward_manager.audio",
            "reward.reward_manager.name=AudioRewardManager",
            "reward.custom_reward_function.path=pkg://audio_reward.trainer_plugin.reward_fn",
            "reward.custom_reward_function.name=compute_score",
            f"+reward.custom_reward_function.reward_kwargs.server_url={scorer_url}",
        ])
    manager = load_reward_manager(config, tokenizer=None)
    assert type(manager).__name__ == "AudioRewardManager" and type(manager).__module__.startswith("verl_omni.")

    def rollout(spoken: str) -> DataProto:
        wave, rate = synth_speech(spoken)
        fields = {
            "audio": torch.from_numpy(wave).float(),
            "audio_sample_rate": int(rate),
            "qwen3_tts_talker_replay": {"text_ids": [1, 2, 3], "audio_codes": torch.zeros(4, 16, dtype=torch.long)},
        }
        return DataProto.from_dict(
            tensors={"responses": torch.ones(1, 4, dtype=torch.long)},
            non_tensors={
                "data_source": np.array(["tts"], dtype=object),
                "reward_model": np.array([{"style": "model", "ground_truth": TEXT}], dtype=object),
                "extra_info": np.array([{"id": "row-7", "split": "train"}], dtype=object),
                "tool_extra_fields": np.array([fields], dtype=object),
                "global_steps": np.array([3]),
            },
        )

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        try:
            return await manager.run_single(rollout(TEXT)), await manager.run_single(rollout(WRONG))
        finally:
            await close_cached_clients()

    good, bad = asyncio.run(both())
    assert good["reward_score"] > 0.9 and good["reward_extra_info"]["cer"] < 0.1
    assert bad["reward_score"] < good["reward_score"] - 0.3
    assert set(good["reward_extra_info"]) == set(bad["reward_extra_info"])  # verl takes the keys from the first
