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
    "visible_cores": "validates a rule of the Neuron runtime's core allocation (one contiguous run of cores), "
    "which no Python library can fix or report",
    "unused_device": "reports a script's own device choice (a model built, no tensor ever on a NeuronCore); "
    "no library can fix that",
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
    "NEURONCOMPAT_KERNELS_UNIVERSAL",
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
    patches = report[next(i for i, text in enumerate(report) if text.startswith("patches ")) :]
    line = next(text for text in patches if text.split()[:1] == [patch_id])  # not the library of the same name
    assert line.split()[1:3] == ["stood", "down"] and "(fixed upstream in " in line, line
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

    from neuroncompat import shim as shim_module

    upstream = acc_modeling.get_max_memory

    def get_max_memory(max_memory: dict | None = None) -> dict:
        """accelerate with a Neuron branch: every NeuronCore is reported, as GPUs are."""
        if max_memory is None and neuron_available():
            return {
                **{i: torch.neuron.get_device_properties(i).total_memory for i in range(torch.neuron.device_count())},
                **upstream(None),
            }
        return upstream(max_memory)

    diffusers_before = _diffusers_placement("device_map")  # imported first: it binds accelerate's by name
    monkeypatch.setattr(acc_modeling, "get_max_memory", get_max_memory)
    before = PreTrainedModel.__dict__["from_pretrained"]
    _assert_stands_down(shim, "device_map", caplog)
    assert not shim_module._patches["device_map"]._undo
    # the kernels patch, still applied, wraps from_pretrained too (after device_map would): upstream's, directly
    assert PreTrainedModel.__dict__["from_pretrained"].__func__.__wrapped__ is before.__func__
    assert acc_modeling.get_max_memory is get_max_memory
    if diffusers_before:  # diffusers_precision wraps ModelMixin.from_pretrained too: device_map must not
        model_load, pipeline_memory = _diffusers_placement("device_map")
        assert "device_map.py" not in _wrapper_files(model_load.__func__)
        assert pipeline_memory is diffusers_before[1]


def _diffusers_placement(patch_id: str) -> tuple[Any, ...]:
    """What ``device_map`` or ``dispatch_model`` would rebind in diffusers (nothing where it is not installed)."""
    try:
        import diffusers.models.modeling_utils as modeling_utils
        import diffusers.pipelines.pipeline_loading_utils as loading_utils
    except ImportError:
        return ()
    if patch_id == "device_map":
        return modeling_utils.ModelMixin.__dict__["from_pretrained"], loading_utils.get_max_memory
    return modeling_utils.dispatch_model, loading_utils.dispatch_model


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
    _assert_stands_down(shim, "compile", caplog)
    assert "compile.py" not in _compile_wrappers()


def _compile_wrappers() -> list[str]:
    """The patch files whose wrappers ``torch.compile`` goes through now (two patches wrap it)."""
    return _wrapper_files(torch.compile)


def _wrapper_files(function: Callable[..., Any]) -> list[str]:
    """The files of the wrappers (``functools.wraps`` chain) around ``function``'s original."""
    files: list[str] = []
    current: Any = function
    while current is not None:
        files.append(Path(current.__code__.co_filename).name)
        current = getattr(current, "__wrapped__", None)
    return files[:-1]


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
    assert flex_attention.WrappedFlexAttention.__dict__["__init__"] is __init__


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

    diffusers_before = _diffusers_placement("dispatch_model")  # imported first: it binds accelerate's by name
    monkeypatch.setattr(big_modeling, "dispatch_model", dispatch_model)
    monkeypatch.setattr(accelerate, "dispatch_model", dispatch_model)
    _assert_stands_down(shim, "dispatch_model", caplog)
    assert big_modeling.dispatch_model is dispatch_model and accelerate.dispatch_model is dispatch_model
    assert _diffusers_placement("dispatch_model") == diffusers_before


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


def test_safetensors_device_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import safetensors.torch

    upstream = safetensors.torch.safe_open

    def safe_open(filename: Any, framework: str, device: Any = "cpu", **kwargs: Any) -> Any:
        """safetensors that knows the neuron device: reads on the host, as for every accelerator."""
        if str(device).startswith("neuron"):
            device = "cpu"  # the fix would place the tensors itself; the probe only needs acceptance
        return upstream(filename, framework=framework, device=device, **kwargs)

    monkeypatch.setattr(safetensors.torch, "safe_open", safe_open)
    before = safetensors.torch.load_file
    _assert_stands_down(shim, "safetensors_device", caplog)
    assert safetensors.torch.load_file is before


def test_kernels_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    kernels = pytest.importorskip("kernels")
    from kernels import load, resolver, variants
    from transformers.integrations import hub_kernels

    from neuroncompat import shim as shim_module

    # transformers' fix: its default mapping maps Neuron (built once a compatible kernels is installed).
    monkeypatch.setattr(
        hub_kernels,
        "get_kernel_mapping_transformers",
        lambda: {"RMSNorm": {"cuda": "kernels-community/rmsnorm", "neuron": "aws-neuron/rmsnorm-nki"}},
        raising=False,
    )
    # kernels' fix: no torch-universal build for the Neuron backend, and a Neuron word in the no-build error.
    upstream = variants._check_variants

    def _check_variants(candidates: list[Any], selected_backend: Any, *args: Any) -> list[Any]:
        decisions = upstream(candidates, selected_backend, *args)
        if selected_backend.name != "neuron":
            return decisions
        return [
            variants.VariantRejected(variant=d.variant, reason="universal builds do not run on Neuron")
            if isinstance(d, variants.VariantAccepted) and d.variant.variant_str == "torch-universal"
            else d
            for d in decisions
        ]

    monkeypatch.setattr(variants, "_check_variants", _check_variants)
    for name in ("resolve_local_kernel", "resolve_hub_kernel", "resolve_hub_cache_kernel"):
        original = getattr(resolver, name)

        def fixed(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            """Raises "no torch-neuron build: Neuron needs build/torch-neuron" where the repo lacks one."""
            return __original(*args, **kwargs)

        monkeypatch.setattr(resolver, name, fixed)
    before = (kernels.get_kernel, load.get_kernel)
    _assert_stands_down(shim, "kernels", caplog)
    assert (kernels.get_kernel, load.get_kernel) == before and variants._check_variants is _check_variants
    assert not shim_module._patches["kernels"]._undo  # from_pretrained is device_map's to wrap, not this patch's


def test_diffusers_generator_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("diffusers")
    import diffusers.utils.torch_utils as torch_utils

    upstream = torch_utils.randn_tensor
    code = upstream.__code__

    def randn_tensor(
        shape: Any, generator: Any = None, device: Any = None, dtype: Any = None, layout: Any = None
    ) -> torch.Tensor:
        """diffusers with the fix: a neuron generator draws on its own device; the rest as before."""
        device = torch.device(device) if isinstance(device, str) else device
        if generator is not None and not isinstance(generator, list) and generator.device.type == "neuron":
            return torch.randn(shape, generator=generator, device=generator.device, dtype=dtype).to(device)
        return upstream(shape, generator=generator, device=device, dtype=dtype, layout=layout)

    monkeypatch.setattr(torch_utils, "randn_tensor", randn_tensor)
    _assert_stands_down(shim, "diffusers_generator", caplog)
    assert torch_utils.randn_tensor is randn_tensor
    assert upstream.__code__ is code and randn_tensor.__code__ is not code


def test_diffusers_attention_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("diffusers")
    import diffusers.models.attention_dispatch as dispatch
    from diffusers import DiffusionPipeline, ModelMixin

    upstream = dispatch._check_attention_backend_requirements

    def _check_attention_backend_requirements(backend: Any) -> None:
        """diffusers gating its backends on the device: on neuron only the ones with a Neuron kernel pass."""
        upstream(backend)

    monkeypatch.setattr(dispatch, "_check_attention_backend_requirements", _check_attention_backend_requirements)
    before = (
        ModelMixin.__dict__["set_attention_backend"],
        DiffusionPipeline.__dict__["enable_xformers_memory_efficient_attention"],
    )
    context = dispatch.attention_backend
    _assert_stands_down(shim, "diffusers_attention", caplog)
    after = (
        ModelMixin.__dict__["set_attention_backend"],
        DiffusionPipeline.__dict__["enable_xformers_memory_efficient_attention"],
    )
    assert after == before and dispatch.attention_backend is context


def test_diffusers_vae_compile_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from torch._dynamo.eval_frame import OptimizedModule

    upstream = OptimizedModule.__getattr__

    def __getattr__(self: Any, name: str) -> Any:
        """torch handing over a compiled module's methods compiled with the module's options, as the fix would."""
        return upstream(self, name)

    monkeypatch.setattr(OptimizedModule, "__getattr__", __getattr__)
    _assert_stands_down(shim, "diffusers_vae_compile", caplog)
    assert OptimizedModule.__getattr__ is __getattr__
    assert _compile_wrappers() == ["compile.py"]


def test_diffusers_precision_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("diffusers")
    from diffusers import DiffusionPipeline, ModelMixin
    from diffusers.utils import torch_utils

    # The fix: diffusers adjusts float16 for the neuron device, as it does float64 and int64.
    adjusted = {**torch_utils._DTYPE_UNSUPPORTED_DEVICES, torch.float16: frozenset({"neuron"})}
    monkeypatch.setattr(torch_utils, "_DTYPE_UNSUPPORTED_DEVICES", adjusted)
    _assert_stands_down(shim, "diffusers_precision", caplog)
    for cls in (DiffusionPipeline, ModelMixin):  # other patches wrap them too
        assert "diffusers_precision.py" not in _wrapper_files(cls.__dict__["from_pretrained"].__func__)


def test_diffusers_group_offload_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("diffusers")
    import diffusers.hooks
    from diffusers.hooks import group_offloading

    upstream = group_offloading.apply_group_offloading

    def apply_group_offloading(module: Any, onload_device: Any, *args: Any, **kwargs: Any) -> None:
        """diffusers offloading without streams where the onload backend has none, warning instead of raising."""
        backend = torch.device(onload_device)
        if kwargs.get("use_stream") and not hasattr(getattr(torch, backend.type, None), "Stream"):
            kwargs["use_stream"] = kwargs["record_stream"] = False
        upstream(module, onload_device, *args, **kwargs)

    monkeypatch.setattr(group_offloading, "apply_group_offloading", apply_group_offloading)
    monkeypatch.setattr(diffusers.hooks, "apply_group_offloading", apply_group_offloading)
    _assert_stands_down(shim, "diffusers_group_offload", caplog)
    assert diffusers.hooks.apply_group_offloading is apply_group_offloading


def test_diffusers_warmup_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("diffusers")
    import diffusers.models.modeling_utils as modeling_utils

    upstream = modeling_utils._caching_allocator_warmup

    def _caching_allocator_warmup(model: Any, expanded_device_map: dict[str, Any], *args: Any) -> None:
        """diffusers skipping Neuron in the warm-up, as transformers does (no allocator pool to prime)."""
        kept = {k: d for k, d in expanded_device_map.items() if torch.device(d).type != "neuron"}
        upstream(model, kept, *args)

    monkeypatch.setattr(modeling_utils, "_caching_allocator_warmup", _caching_allocator_warmup)
    _assert_stands_down(shim, "diffusers_warmup", caplog)
    assert modeling_utils._caching_allocator_warmup is _caching_allocator_warmup


def test_diffusers_complex_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("diffusers")
    from diffusers.models.modeling_utils import ModelMixin
    from diffusers.utils import torch_utils

    # The fix: diffusers lists the neuron device for complex dtypes, where it lists fp64 and int64 today.
    unsupported = {**torch_utils._DTYPE_UNSUPPORTED_DEVICES, torch.complex64: frozenset({"neuron"})}
    monkeypatch.setattr(torch_utils, "_DTYPE_UNSUPPORTED_DEVICES", unsupported)
    _assert_stands_down(shim, "diffusers_complex", caplog)
    assert "diffusers_complex.py" not in _wrapper_files(ModelMixin.to)
    assert "diffusers_complex.py" not in _wrapper_files(ModelMixin.__dict__["from_pretrained"].__func__)


def test_diffusers_neuron_artifact_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("diffusers")
    from diffusers.models.modeling_utils import ModelMixin
    from diffusers.pipelines.pipeline_utils import DiffusionPipeline

    def knows_exports(cls: type) -> Callable[..., Any]:
        upstream = cls.__dict__["from_pretrained"].__func__

        def from_pretrained(owner: type, *args: Any, **kwargs: Any) -> Any:
            """diffusers telling a model.neuron export folder from a diffusers folder itself."""
            return upstream(owner, *args, **kwargs)

        return classmethod(from_pretrained)  # type: ignore[return-value]

    for cls in (DiffusionPipeline, ModelMixin):
        monkeypatch.setattr(cls, "from_pretrained", knows_exports(cls))
    _assert_stands_down(shim, "diffusers_neuron_artifact", caplog)
    for cls in (DiffusionPipeline, ModelMixin):
        assert "diffusers_neuron_artifact.py" not in _wrapper_files(cls.__dict__["from_pretrained"].__func__)
    # Other patches wrapped the stand-ins: unwrap them before monkeypatch puts the originals back, or the
    # shim's revert at teardown would restore the stand-ins over them.
    shim.revert()


def test_cross_device_data_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import importlib

    from peft.tuners.lora import layer as lora_layer

    from neuroncompat.patches.cross_device_data import _LORA_INITS

    def fixed_move(upstream: Callable[..., Any]) -> Callable[..., Any]:
        def _move_states_to_device(params: Any, buffers: Any, device: Any, *args: Any) -> Any:
            """torch moving CPU states with torch.utils.swap_tensors where set_data refuses the two types."""
            return upstream(params, buffers, device, *args)

        return _move_states_to_device

    def fixed_init(upstream: Callable[..., Any]) -> Callable[..., Any]:
        def init(self: Any, adapter_name: str, *args: Any, **kwargs: Any) -> Any:
            """peft moving the adapter to the base layer's device before it computes its weights there."""
            self._move_adapter_to_device_of_base_layer(adapter_name)
            return upstream(self, adapter_name, *args, **kwargs)

        return init

    from diffusers.hooks import group_offloading
    from diffusers.loaders.textual_inversion import TextualInversionLoaderMixin

    class ModuleGroup(group_offloading.ModuleGroup):  # type: ignore[misc]
        """diffusers moving each tensor with torch.utils.swap_tensors where set_data refuses the two types."""

    def unload_textual_inversion(self: Any, *args: Any, **kwargs: Any) -> Any:
        """diffusers building the filtered embedding on the text encoder's device."""
        return upstream_unload(self, *args, **kwargs)

    upstream_unload = TextualInversionLoaderMixin.__dict__["unload_textual_inversion"]
    fixed: list[tuple[Any, str, Any]] = [
        (group_offloading, "ModuleGroup", ModuleGroup),
        (TextualInversionLoaderMixin, "unload_textual_inversion", unload_textual_inversion),
    ]
    for name in ("torch.distributed.fsdp._fully_shard._fsdp_init", "torch.distributed.fsdp._init_utils"):
        module = importlib.import_module(name)
        fixed.append((module, "_move_states_to_device", fixed_move(module._move_states_to_device)))
    for cls in vars(lora_layer).values():
        if isinstance(cls, type) and cls.__module__ == lora_layer.__name__:
            fixed += [(cls, m, fixed_init(cls.__dict__[m])) for m in _LORA_INITS if m in cls.__dict__]
    for owner, attribute, value in fixed:
        monkeypatch.setattr(owner, attribute, value)
    _assert_stands_down(shim, "cross_device_data", caplog)
    assert all(owner.__dict__[attribute] is value for owner, attribute, value in fixed)


def test_parameter_identity_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    upstream = torch.nn.Module._apply

    def _apply(self: Any, fn: Callable[..., Any], recurse: bool = True) -> Any:
        """torch keeping each parameter object (torch.utils.swap_tensors) where `.data =` is refused."""
        return upstream(self, fn, recurse)

    monkeypatch.setattr(torch.nn.Module, "_apply", _apply)
    methods = {name: torch.nn.Module.__dict__[name] for name in ("to", "cpu")}
    _assert_stands_down(shim, "parameter_identity", caplog)
    assert all(torch.nn.Module.__dict__[name] is method for name, method in methods.items())


def test_mem_get_info_stands_down(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def mem_get_info(device: Any = None) -> tuple[int, int]:
        """TorchNeuron's own: (free, total) bytes of a NeuronCore."""
        return torch.accelerator.get_memory_info(device)

    monkeypatch.setattr(torch.neuron, "mem_get_info", mem_get_info, raising=False)
    _assert_stands_down(shim, "mem_get_info", caplog)
    assert torch.neuron.mem_get_info is mem_get_info
