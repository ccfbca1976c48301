"""A Qwen3-TTS actor checkpoint written by verl's own save code, as a verl-omni run writes it.

verl-omni's Qwen3-TTS actor (``Qwen3TTSTalkerAdapter`` in
``verl_omni/pipelines/qwen3_tts/talker_training_adapter.py``) loads the whole
``Qwen3TTSForConditionalGeneration`` through ``AutoModelForTextToWaveform``,
deletes ``speaker_encoder``, ``speech_tokenizer`` and ``code2wav``, trains
``talker.model.*`` and ``talker.codec_head.*`` only, and hands the module to
verl's FSDP engine (``FSDPEngineWithLMHead``), whose ``FSDPCheckpointManager``
writes ``global_step_N/actor/``.  :func:`write_checkpoint` does the same on
CPU: gloo, a one-dimensional ``fsdp`` device mesh (as the engine builds),
FSDP1 with ``use_orig_params`` (the recipe's ``strategy=fsdp``), one AdamW
step on a codec-0 loss, then ``FSDPCheckpointManager.save_checkpoint``.

It runs where verl's checkpoint code and qwen-tts import together: qwen-tts
0.1.1 needs transformers 4.57.3, verl 0.9.1's metadata wants >= 5.5.3, but
``verl.utils.checkpoint`` itself imports with 4.57.3, so the TTS environment
gets verl with ``--no-deps`` (scripts/envs/tts.sh).
"""

from __future__ import annotations

import os
import socket
import types
from pathlib import Path
from typing import Any

TRAINED_PREFIXES = ("talker.model.", "talker.codec_head.")
"""What verl-omni's adapter leaves trainable."""
STRIPPED = ("speaker_encoder", "speech_tokenizer", "code2wav")
"""``Qwen3TTSTalkerAdapter.get_strip_modules``."""
REFERENCE = "trained_full_state.safetensors"
"""The trained weights as FSDP's full state dict gives them (rank 0), beside the checkpoint, to compare with."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _codec0_forward(self: Any, inputs_embeds: Any) -> Any:
    """The actor's forward, reduced to what GRPO differentiates: the talker's codec-0 logits."""
    hidden = self.talker.model(inputs_embeds=inputs_embeds, use_cache=False).last_hidden_state
    return self.talker.codec_head(hidden)


def _rank(rank: int, world: int, port: int, base: str, actor_dir: str, spk_embed: str,
          save_contents: list[str]) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FullStateDictConfig, ShardingStrategy, StateDictType
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    from tests.testkit.tiny_qwen3_tts import import_qwen_tts

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        import_qwen_tts()
        from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
        from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration
        from transformers import AutoConfig, AutoModelForTextToWaveform, AutoTokenizer
        from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

        # the adapter's register_auto_classes, then the engine's from_pretrained at model_dtype=float32
        AutoConfig.register("qwen3_tts", Qwen3TTSConfig, exist_ok=True)
        AutoModelForTextToWaveform.register(Qwen3TTSConfig, Qwen3TTSForConditionalGeneration, exist_ok=True)
        module = AutoModelForTextToWaveform.from_pretrained(base, dtype=torch.float32)
        for name in STRIPPED:
            if hasattr(module, name):
                delattr(module, name)
        # the rest of the adapter's configure_model / configure_tokenizer, as far as it changes what is saved
        speaker_config = module.config.speaker_encoder_config
        if "dtype" in vars(speaker_config):
            delattr(speaker_config, "dtype")  # transformers' runtime field, which the config cannot diff
        module.config.tts_spk_embed_path = spk_embed
        module.config.tts_language = "Auto"
        module.config.talker_config.tie_word_embeddings = False
        for name, param in module.named_parameters():
            param.requires_grad_(name.startswith(TRAINED_PREFIXES))
        module.forward = types.MethodType(_codec0_forward, module)
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("fsdp",))
        model = FSDP(module, use_orig_params=True, device_mesh=mesh, sharding_strategy=ShardingStrategy.FULL_SHARD,
                     device_id=torch.device("cpu"))
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        torch.manual_seed(1234)  # the same batch on every rank
        hidden = module.config.talker_config.hidden_size
        logits = model(inputs_embeds=torch.randn(2, 6, hidden))
        targets = torch.randint(0, logits.shape[-1], logits.shape[:-1])
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()
        optimizer.step()
        scheduler.step()
        # (verl's get_fsdp_full_state_dict gathers to rank 0 only, which crashes FSDP1 on CPU with two ranks)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                                  FullStateDictConfig(offload_to_cpu=False, rank0_only=False)):
            full = model.state_dict()
        if rank == 0:
            from safetensors.torch import save_file

            save_file({k: v.contiguous() for k, v in full.items()},
                      str(Path(actor_dir).parent.parent / REFERENCE))
        manager = FSDPCheckpointManager(
            model=model, optimizer=optimizer, lr_scheduler=scheduler,
            processing_class=AutoTokenizer.from_pretrained(base),
            checkpoint_config={"save_contents": save_contents, "load_contents": save_contents})
        manager.save_checkpoint(local_path=actor_dir, global_step=1)
    finally:
        dist.destroy_process_group()


def write_checkpoint(base: Path, run_dir: Path, world: int, spk_embed: Path,
                     save_contents: tuple[str, ...] = ("model", "optimizer", "extra")) -> Path:
    """Train one step on ``world`` CPU ranks and save ``run_dir/global_step_1/actor``; returns ``global_step_1``."""
    import torch.multiprocessing as mp

    step = run_dir / "global_step_1"
    actor = step / "actor"
    run_dir.mkdir(parents=True, exist_ok=True)
    mp.start_processes(_rank, args=(world, _free_port(), str(base), str(actor), str(spk_embed), list(save_contents)),
                       nprocs=world, join=True, start_method="spawn")
    return step


LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
LORA_REFERENCE = "merged_reference.safetensors"
"""peft's own ``merge_and_unload`` of the trained adapter, beside the checkpoint, to compare the export with."""


def tiny_thinker(seed: int = 0) -> Any:
    """A random Qwen3-Omni thinker at toy sizes, from transformers' own config and model classes."""
    import torch
    from transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe import (
        Qwen3OmniMoeThinkerForConditionalGeneration,
    )

    from tests.testkit.tiny_thinker import thinker_config

    torch.manual_seed(seed)
    return Qwen3OmniMoeThinkerForConditionalGeneration(thinker_config()).eval()


def _lora_rank(rank: int, world: int, port: int, actor_dir: str, exclude: str, base: str | None) -> None:
    import torch
    import torch.distributed as dist
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import save_file
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        # the recipe's LoRA: rank 32 / alpha 64 there, 4 / 8 here; the encoders excluded by the same pattern
        if base is None:
            thinker = tiny_thinker()
        else:
            from transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe import (
                Qwen3OmniMoeThinkerForConditionalGeneration,
            )

            thinker = Qwen3OmniMoeThinkerForConditionalGeneration.from_pretrained(base)
        model = get_peft_model(thinker, LoraConfig(r=4, lora_alpha=8, target_modules=LORA_TARGETS,
                                                          exclude_modules=exclude, task_type="CAUSAL_LM"))
        torch.manual_seed(99)  # a trained adapter: lora_B starts at zero, so give it values
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.data.normal_(0, 0.5)
        if rank == 0:
            import copy

            merged = copy.deepcopy(model).merge_and_unload().state_dict()
            save_file({k: v.contiguous() for k, v in merged.items()},
                      str(Path(actor_dir).parent.parent / LORA_REFERENCE))
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("fsdp",))
        fully_shard(model, mesh=mesh)  # the thinker recipe's strategy=fsdp2
        manager = FSDPCheckpointManager(model=model, checkpoint_config={"save_contents": ["model"],
                                                                        "load_contents": ["model"]})
        manager.save_checkpoint(local_path=actor_dir, global_step=1)
    finally:
        dist.destroy_process_group()


def write_lora_checkpoint(run_dir: Path, world: int, exclude: str, base: Path | None = None) -> Path:
    """A LoRA thinker checkpoint saved by verl's FSDPCheckpointManager under FSDP2; returns ``global_step_1``.

    The run starts from :func:`tiny_thinker`, or from the thinker folder ``base``.
    """
    import torch.multiprocessing as mp

    step = run_dir / "global_step_1"
    run_dir.mkdir(parents=True, exist_ok=True)
    mp.start_processes(_lora_rank, args=(world, _free_port(), str(step / "actor"), exclude,
                                        None if base is None else str(base)), nprocs=world,
                       join=True, start_method="spawn")
    return step
