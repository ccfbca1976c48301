"""A validation row is known only by its ``extra_info.split``: without one, the manager says so at once.

verl 0.9.1 gives per-sample rewards no ``validate`` flag, so our manager, loaded by verl's own
``load_reward_manager`` and scoring on a real scorer, writes validation audio only for rows whose split is a
validation split. The first row without a split gets one warning in the run's log, not silence until the
post-run check.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.testkit.speech import synth_speech

TEXT = "Please call Stella and ask her to bring these things."


def test_a_row_without_split_is_warned_about_once_and_a_val_row_writes_audio(
        scorer_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("verl")
    torch = pytest.importorskip("torch")
    import verl
    from hydra import compose, initialize_config_dir
    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager

    from audio_reward.trainer_plugin.validation_log import ValidationLogger
    from audio_reward.trainer_plugin.verl_omni_score import close_cached_clients

    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=[
            "reward.reward_manager.source=importlib",
            "reward.reward_manager.module.path=pkg://audio_reward.trainer_plugin.reward_manager",
            "reward.reward_manager.name=AudioScoreRewardManager",
            f"+reward.audio_reward.server_url={scorer_url}",
            f"+reward.audio_reward.validation_dir={tmp_path / 'validation_audio'}",
        ])
    manager = load_reward_manager(config, tokenizer=None)
    wave, rate = synth_speech(TEXT)

    def rollout(index: int, extra_info: dict[str, Any]) -> Any:
        return DataProto.from_dict(
            tensors={"responses": torch.ones(1, 4, dtype=torch.long)},
            non_tensors={
                "data_source": np.array(["tts"], dtype=object),
                "reward_model": np.array([{"style": "rule", "ground_truth": TEXT}], dtype=object),
                "extra_info": np.array([{"index": str(index), **extra_info}], dtype=object),
                "tool_extra_fields": np.array([{"audio": torch.from_numpy(wave), "audio_sample_rate": rate}],
                                              dtype=object),
                "global_steps": np.array([20]),
            },
        )

    async def score() -> list[dict[str, Any]]:
        try:
            return [await manager.run_single(rollout(i, info))
                    for i, info in enumerate([{}, {}, {"split": "train"}, {"split": "val"}])]
        finally:
            await close_cached_clients()

    with caplog.at_level(logging.WARNING, logger="audio_reward.trainer_plugin.reward_manager"):
        results = asyncio.run(score())
    assert all(r["reward_score"] > 0.9 for r in results)  # every row is scored
    warnings = [r.getMessage() for r in caplog.records if "has no extra_info.split" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].startswith("sample 0 has no extra_info.split")
    (step,) = ValidationLogger(tmp_path / "validation_audio").passes()
    assert sorted(p.name for p in step.glob("sample_*.wav")) == ["sample_000.wav"]  # the val row alone
