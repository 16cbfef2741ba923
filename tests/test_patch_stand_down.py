"""Every patch stands down when upstream has fixed its gap, and then changes nothing.

Feature detection, never version strings, is the shim's promise: on a transformers/accelerate/TRL/
torch that fixed a gap, the patch for it must notice by itself. Each test below puts the upstream
fix in place with ``monkeypatch`` (the fixed function, class attribute or registry entry, as the
fix would ship it, delegating to the real one where it needs to run), applies the shim on the
simulated device, imports every patch target, and checks what a user sees: the patch reports
``stood-down`` in ``neuroncompat.status()`` and in ``neuroncompat doctor``, logs nothing, and the
upstream objects it would have wrapped (and the environment variables it would have set) are
untouched.

Several patches detect a gap by reading the upstream function's source (the one place the fix
would land); their stand-ins are therefore written as the fix would be, mentioning what the real
fix must mention (the ``neuron`` device, a compile ``backend``, the value dtype).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from neuroncompat import doctor
from neuroncompat.device import neuron_available
from neuroncompat.shim import patch_ids

# Patches with no upstream library gap to detect, and why.
NO_UPSTREAM_GAP = {
    "visible_cores": "validates a rule of the Neuron runtime's core allocation (aligned pairs under LNC=2), "
    "which no Python library can fix or report",
}

_PATCH_ENV = (
    "HF_DEACTIVATE_ASYNC_LOAD",
    "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_SHAPES",
    "USE_TORCH_XLA",
    "NEURON_RT_VISIBLE_CORES",
    "CUDA_VISIBLE_DEVICES",
    "NEURONCOMPAT_DEVICE_MAP",
    "NEURONCOMPAT_RECOMPILE_LIMIT",
    "NEURONCOMPAT_VLLM_FALLBACK",
)


@pytest.fixture
def shim(shim: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The shared fixture, with none of the variables the patches read or set inherited."""
    for name in _PATCH_ENV:
        monkeypatch.delenv(name, raising=False)
    return shim


def _assert_stands_down(shim: ModuleType, patch_id: str, caplog: pytest.LogCaptureFixture) -> None:
    """Apply, load every target, and check the patch stood down without a trace."""
    with caplog.at_level(logging.DEBUG, logger="neuroncompat"):
        shim.apply()
        doctor._import_patch_targets()
        report = doctor.report()
    status = shim.status()[patch_id]
    assert status.state == "stood-down", f"{patch_id}: {status.state} ({status.detail})"
    assert status.detail.startswith("upstream fixed the gap")
    line = next(text for text in report if text.split()[:1] == [patch_id])
    assert line.split()[1] == "stood-down", line
    assert f"[{patch_id}]" not in caplog.text, "a patch that stood down logs nothing"


def _source_fix(upstream: Callable[..., Any]) -> Callable[..., Any]:
    """A fixed ``upstream`` whose Neuron handling lives outside Python (a bitsandbytes Neuron build,
    TF32 reported by the device): it knows the neuron device, as the fix's source would, and runs
    upstream's code."""

    def fixed(*args: Any, **kwargs: Any) -> Any:
        return upstream(*args, **kwargs)  # upstream now supports the neuron device

    return fixed


def test_every_patch_has_a_stand_down_test() -> None:
    tested = {
        name[len("test_") : -len("_stands_down")]
        for name in globals()
        if name.startswith("test_") and name.endswith("_stands_down")
    }
    assert tested.isdisjoint(NO_UPSTREAM_GAP)
    assert tested | set(NO_UPSTREAM_GAP) == set(patch_ids())


def test_every_patch_sees_its_gap_on_the_pinned_versions(shim: ModuleType) -> None:
    """The other side of each test below: unfixed, the same detection keeps the patch applied."""
    shim.apply()
    doctor._import_patch_targets()
    states = {patch_id: status.state for patch_id, status in shim.status().items()}
    assert states == dict.fromkeys(patch_ids(), "applied")


def test_device_map_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import accelerate.utils.modeling as acc_modeling
    from transformers import PreTrainedModel

    upstream = acc_modeling.get_max_memory

    def get_max_memory(max_memory: dict | None = None) -> dict:
        """accelerate with a Neuron branch: every NeuronCore is reported, as GPUs are."""
        if max_memory is None and neuron_available():
            return {
                **{i: torch.neuron.get_device_properties(i).total_memory for i in range(torch.neuron.device_count())},
                **upstream(None),
            }
        return upstream(max_memory)

    monkeypatch.setattr(acc_modeling, "get_max_memory", get_max_memory)
    before = PreTrainedModel.__dict__["from_pretrained"]
    _assert_stands_down(shim, "device_map", caplog)
    assert PreTrainedModel.__dict__["from_pretrained"] is before
    assert acc_modeling.get_max_memory is get_max_memory


def test_async_load_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import transformers.core_model_loading as loading

    upstream = loading.convert_and_load_state_dict_in_model

    def convert_and_load_state_dict_in_model(*args: Any, **kwargs: Any) -> Any:
        """transformers deciding itself to load a neuron device map on the main thread."""
        return upstream(*args, **kwargs)

    monkeypatch.setattr(loading, "convert_and_load_state_dict_in_model", convert_and_load_state_dict_in_model)
    _assert_stands_down(shim, "async_load", caplog)
    assert "HF_DEACTIVATE_ASYNC_LOAD" not in os.environ


def test_static_cache_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import transformers.cache_utils as cache_utils
    from trl import GRPOConfig, RLOOConfig

    lazy = cache_utils.StaticLayer.lazy_initialization

    def lazy_initialization(layer: Any, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        """transformers 5.24's fix: the values are allocated in value_states.dtype."""
        lazy(layer, key_states, value_states)
        layer.values = layer.values.to(value_states.dtype)

    def early_initialization(
        cache: Any,
        batch_size: int,
        num_heads: int,
        head_dim: int,
        key_dtype: torch.dtype,
        value_dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        """Ahead-of-time allocation with a dtype each for keys and values."""
        for layer in cache.layers:
            layer.lazy_initialization(
                torch.zeros((batch_size, num_heads, 0, head_dim), dtype=key_dtype, device=device),
                torch.zeros((batch_size, num_heads, 0, head_dim), dtype=value_dtype, device=device),
            )

    monkeypatch.setattr(cache_utils.StaticLayer, "lazy_initialization", lazy_initialization)
    monkeypatch.setattr(cache_utils.Cache, "early_initialization", early_initialization)
    before = {
        cls: cls.__dict__.get("update") for cls in (cache_utils.StaticLayer, cache_utils.StaticSlidingWindowLayer)
    }
    configs = {cls: cls.__dict__["__post_init__"] for cls in (GRPOConfig, RLOOConfig)}
    _assert_stands_down(shim, "static_cache", caplog)
    assert {cls: cls.__dict__.get("update") for cls in before} == before
    assert {cls: cls.__dict__["__post_init__"] for cls in configs} == configs


def test_dynamic_shapes_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import torch._dynamo.config as dynamo_config
    from transformers.generation.configuration_utils import CompileConfig

    # The fix: Dynamo's own defaults are static shapes and room for a graph per shape bucket.
    monkeypatch.setattr(dynamo_config._config["automatic_dynamic_shapes"], "default", False)
    monkeypatch.setattr(dynamo_config._config["recompile_limit"], "default", 64)
    before = (dynamo_config.automatic_dynamic_shapes, dynamo_config.recompile_limit, CompileConfig.__dict__["__init__"])
    _assert_stands_down(shim, "dynamic_shapes", caplog)
    assert (
        dynamo_config.automatic_dynamic_shapes,
        dynamo_config.recompile_limit,
        CompileConfig.__dict__["__init__"],
    ) == before
    assert "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_SHAPES" not in os.environ


def test_compile_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from torch._inductor.codegen.common import DeviceCodegen, device_codegens
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    # The fix: a code generator for the neuron device, as register_backend_for_device records it.
    monkeypatch.setitem(device_codegens, "neuron", DeviceCodegen(CppScheduling, PythonWrapperCodegen))
    before = torch.compile
    _assert_stands_down(shim, "compile", caplog)
    assert torch.compile is before


def test_pipeline_device_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers.pipelines.base import Pipeline

    upstream = Pipeline.__dict__["__init__"]

    def __init__(pipeline: Any, *args: Any, device: Any = None, **kwargs: Any) -> None:
        """Pipeline with a Neuron branch: no device means the first NeuronCore, as for GPUs."""
        if device is None and neuron_available():
            device = torch.device("neuron", 0)
        upstream(pipeline, *args, device=device, **kwargs)

    monkeypatch.setattr(Pipeline, "__init__", __init__)
    _assert_stands_down(shim, "pipeline_device", caplog)
    assert Pipeline.__dict__["__init__"] is __init__


def test_precision_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from accelerate import Accelerator
    from transformers import TrainingArguments
    from transformers.utils import import_utils

    accelerator_init = Accelerator.__dict__["__init__"]

    def __init__(accelerator: Any, *args: Any, **kwargs: Any) -> None:
        # accelerate's check is one line (accelerator.py:571); the fix adds neuron to it.
        supported_device = ("xpu", "cuda", "npu", "xla", "mlu", "musa", "hpu", "sdaa", "mps", "neuron")
        assert supported_device
        accelerator_init(accelerator, *args, **kwargs)

    monkeypatch.setattr(Accelerator, "__init__", __init__)
    monkeypatch.setattr(import_utils, "is_torch_tf32_available", _source_fix(import_utils.is_torch_tf32_available))
    autocast_dtype = torch.get_autocast_dtype("neuron")
    torch.set_autocast_dtype("neuron", torch.bfloat16)  # what torch-neuronx would set on load
    try:
        before = (TrainingArguments.__dict__["__post_init__"], torch.autocast.__dict__["__init__"])
        _assert_stands_down(shim, "precision", caplog)
        assert (TrainingArguments.__dict__["__post_init__"], torch.autocast.__dict__["__init__"]) == before
        assert Accelerator.__dict__["__init__"] is __init__
    finally:
        torch.set_autocast_dtype("neuron", autocast_dtype)


def test_attention_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers import PreTrainedModel
    from transformers import modeling_flash_attention_utils as fa
    from transformers.integrations import flex_attention

    # The fix: every flash kernel ships a Neuron build, and flex attention compiles with a backend.
    monkeypatch.setattr(
        fa,
        "FLASH_ATTN_KERNEL_DEVICES",
        {kernel: (*devices, "neuron") for kernel, devices in fa.FLASH_ATTN_KERNEL_DEVICES.items()},
    )

    def __init__(wrapper: Any, training: bool) -> None:
        if not wrapper._is_flex_compiled or training != wrapper.training:
            wrapper.training = training
            backend = "neuron" if neuron_available() else "inductor"
            wrapper._compiled_flex_attention = torch.compile(flex_attention.flex_attention, backend=backend)
            wrapper._is_flex_compiled = True

    monkeypatch.setattr(flex_attention.WrappedFlexAttention, "__init__", __init__)
    before = PreTrainedModel.__dict__["_check_and_adjust_attn_implementation"]
    _assert_stands_down(shim, "attention", caplog)
    assert PreTrainedModel.__dict__["_check_and_adjust_attn_implementation"] is before


def test_dist_backend_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    # The fix: NCCL serves the neuron device (the platform maps it onto its own collectives).
    monkeypatch.setitem(dist.Backend.backend_capability, "nccl", [*dist.Backend.backend_capability["nccl"], "neuron"])
    before = (dist.init_process_group, distributed_c10d.init_process_group)
    _assert_stands_down(shim, "dist_backend", caplog)
    assert (dist.init_process_group, distributed_c10d.init_process_group) == before


def test_dispatch_model_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import accelerate
    from accelerate import big_modeling

    upstream = big_modeling.dispatch_model

    def dispatch_model(model: Any, device_map: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        """accelerate with model.to(device) after the integer remap, for every accelerator."""
        model = upstream(model, device_map, *args, **kwargs)
        devices = set(device_map.values())
        if len(devices) == 1 and isinstance(index := next(iter(devices)), int) and neuron_available():
            model.to(torch.device("neuron", index))
        return model

    monkeypatch.setattr(big_modeling, "dispatch_model", dispatch_model)
    monkeypatch.setattr(accelerate, "dispatch_model", dispatch_model)
    _assert_stands_down(shim, "dispatch_model", caplog)
    assert big_modeling.dispatch_model is dispatch_model and accelerate.dispatch_model is dispatch_model


def test_safetensors_load_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from accelerate import checkpointing

    def load_accelerator_state(input_dir: str, models: list, *args: Any, **kwargs: Any) -> dict:
        """accelerate that reads safetensors weights on the CPU whatever the map location."""
        for model in models:
            checkpointing.load_model(model, f"{input_dir}/model.safetensors", device="cpu")
        return {}

    monkeypatch.setattr(checkpointing, "load_accelerator_state", load_accelerator_state)
    upstream = checkpointing.load_model
    _assert_stands_down(shim, "safetensors_load", caplog)
    assert checkpointing.load_model is upstream


def test_trl_config_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from trl.trainer.base_config import _BaseConfig

    upstream = _BaseConfig.__dict__["__post_init__"]

    def __post_init__(config: Any) -> None:
        """TRL clearing its CUDA-only choices itself on a neuron device."""
        if not config.use_cpu and neuron_available():
            config.use_liger_kernel = False
            config.padding_free = False
        upstream(config)

    monkeypatch.setattr(_BaseConfig, "__post_init__", __post_init__)
    _assert_stands_down(shim, "trl_config", caplog)
    assert _BaseConfig.__dict__["__post_init__"] is __post_init__


def test_quantization_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers import modeling_utils
    from transformers.quantizers.quantizer_bnb_4bit import Bnb4BitHfQuantizer
    from transformers.quantizers.quantizer_bnb_8bit import Bnb8BitHfQuantizer

    # The fix: bitsandbytes ships a Neuron build, and the quantizers accept the neuron device.
    for quantizer in (Bnb4BitHfQuantizer, Bnb8BitHfQuantizer):
        monkeypatch.setattr(quantizer, "validate_environment", _source_fix(quantizer.__dict__["validate_environment"]))
    before = modeling_utils.get_hf_quantizer
    _assert_stands_down(shim, "quantization", caplog)
    assert modeling_utils.get_hf_quantizer is before


def test_generate_inputs_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers.generation.utils import GenerationMixin

    upstream = GenerationMixin.__dict__["generate"]

    def generate(model: Any, *args: Any, **kwargs: Any) -> Any:
        """transformers keeping the growing neuron inputs on the CPU while it generates."""
        kwargs = {
            k: v.cpu() if isinstance(v, torch.Tensor) and v.device.type == "neuron" else v for k, v in kwargs.items()
        }
        return upstream(model, *args, **kwargs)

    monkeypatch.setattr(GenerationMixin, "generate", generate)
    _assert_stands_down(shim, "generate_inputs", caplog)
    assert GenerationMixin.__dict__["generate"] is generate


def test_vllm_stands_down(shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from trl.generation.vllm_generation import VLLMGeneration
    from trl.trainer.distillation_trainer import DistillationTrainer
    from trl.trainer.grpo_trainer import GRPOTrainer
    from trl.trainer.rloo_trainer import RLOOTrainer

    upstream = VLLMGeneration.__dict__["_init_vllm"]

    def _init_vllm(generation: Any) -> None:
        """TRL running vLLM's Neuron build out of the training process on a neuron device."""
        if generation.accelerator.device.type == "neuron":
            generation.mode = "server"
        upstream(generation)

    monkeypatch.setattr(VLLMGeneration, "_init_vllm", _init_vllm)
    trainers = (GRPOTrainer, RLOOTrainer, DistillationTrainer)
    before = [cls.__dict__["__init__"] for cls in trainers]
    _assert_stands_down(shim, "vllm", caplog)
    assert [cls.__dict__["__init__"] for cls in trainers] == before


def test_xla_coinstall_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    import accelerate.utils.imports as accelerate_imports
    from transformers.utils import import_utils

    (tmp_path / "torch_xla").mkdir()
    (tmp_path / "torch_xla" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))  # torch_xla installed next to torch-neuronx

    def native_neuron_aware(upstream: Callable[..., Any]) -> Callable[..., Any]:
        def is_torch_xla_available(check_is_tpu: bool = False, check_is_gpu: bool = False) -> bool:
            if neuron_available():  # the fix: native neuron is not an XLA host, torch_xla or not
                return False
            return upstream(check_is_tpu=check_is_tpu, check_is_gpu=check_is_gpu)

        return is_torch_xla_available

    for module in (import_utils, accelerate_imports):
        monkeypatch.setattr(module, "is_torch_xla_available", native_neuron_aware(module.is_torch_xla_available))
    flags = (import_utils.USE_TORCH_XLA, accelerate_imports.USE_TORCH_XLA, accelerate_imports._torch_xla_available)
    _assert_stands_down(shim, "xla_coinstall", caplog)
    assert (
        import_utils.USE_TORCH_XLA,
        accelerate_imports.USE_TORCH_XLA,
        accelerate_imports._torch_xla_available,
    ) == flags
    assert "USE_TORCH_XLA" not in os.environ
