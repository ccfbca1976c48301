"""``SpeakAgentLoop``: verl's single-turn agent loop, then the response is spoken into the rollout's extra fields.

verl-omni's TTS rollout hands the reward its audio as the rollout's
``extra_fields`` ``audio`` and ``audio_sample_rate``, which verl passes to the
reward manager (``verl/experimental/agent_loop/agent_loop.py`` line 1016).  Plain
vLLM returns tokens only; this loop speaks the decoded response
(:func:`.speech.speak`, the row's ``extra_info["speech"]`` kind) and puts it
there, so the reward path is the one a Qwen3-TTS run takes.

Select it with an agent-loop file (``scripts/train_cpu.sh`` writes it)::

    - name: speak_agent
      _target_: audio_reward.trainer_plugin.toy_task.speak_agent.SpeakAgentLoop
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import torch
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

from .speech import speak


def _speech_kind(extra_info: Any) -> str:
    info = extra_info.item() if hasattr(extra_info, "item") and not isinstance(extra_info, dict) else extra_info
    return str((info or {}).get("speech", "instant"))


class SpeakAgentLoop(SingleTurnAgentLoop):
    """Single-turn generation; the response's words spoken as the row's kind of speech."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        output = await super().run(sampling_params, **kwargs)
        words = self.tokenizer.decode(output.response_ids, skip_special_tokens=True).split()
        audio, rate = await asyncio.to_thread(speak, words, _speech_kind(kwargs.get("extra_info")))
        output.extra_fields.update(audio=torch.from_numpy(np.ascontiguousarray(audio)), audio_sample_rate=int(rate))
        return output
