"""``compile``: CUDA-style ``torch.compile`` calls compile for Neuron, with static shapes."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType

import pytest
import torch


class _Net(torch.nn.Module):
    """A user module: torch skips tracing its own ``nn`` modules when ``Module.compile`` is used."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).relu()


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return _Net().to("neuron")


def test_without_the_patch_the_device_behaves_as_torchneuron_documents(
    neuron: object, caplog: pytest.LogCaptureFixture
) -> None:
    """The torch.compile reference: backend auto-selected on the device, other modes warn and fall back,
    ``options`` takes a dict, ``dynamic=True`` is rejected during compilation (fallback execution runs it)."""
    model, x = _net(), torch.randn(3, 4, device="neuron")
    out = torch.compile(model)(x)
    assert torch.equal(out.cpu(), model(x).cpu())
    assert [g.rejected for g in neuron.compiles()] == [False], "no backend: auto-selected neuron"
    torch._dynamo.reset()
    with caplog.at_level(logging.WARNING, logger="neuroncompat.simulator"):
        torch.compile(model, backend="neuron", mode="reduce-overhead")(x)
    assert "mode='reduce-overhead'): the neuron backend supports only the default mode" in caplog.text
    torch._dynamo.reset()
    torch.compile(model, backend="neuron", options={"fallback_execution": False})(x)
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"dynamic=True\) is rejected during compilation"):
        torch.compile(model, backend="neuron", dynamic=True)(x)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="neuron", dynamic=True, options={"fallback_execution": True})
    assert torch.equal(compiled(x).cpu(), model(x).cpu())
    assert neuron.compiles()[-1].rejected


def test_a_cpu_graph_still_goes_to_inductor(neuron: object) -> None:
    model = _Net()
    torch.compile(model)(torch.randn(3, 4))
    assert neuron.compiles() == [], "only a graph on the device is the neuron backend's"


def test_default_backend_becomes_neuron(shim: ModuleType, neuron: object, caplog: pytest.LogCaptureFixture) -> None:
    """Under a runtime that leaves Dynamo's default at inductor (the docs' auto-selection may work otherwise)."""
    from torch._dynamo.backends import registry

    shim.apply()
    model, x = _net(), torch.randn(3, 4, device="neuron")
    runtime_default = registry.get_default_backend()
    registry.set_default_backend(None)
    try:
        with caplog.at_level(logging.INFO, logger="neuroncompat"):
            out = torch.compile(model)(x)
    finally:
        registry.set_default_backend(runtime_default)
    assert torch.equal(out.cpu(), model(x).cpu())
    assert [g.rejected for g in neuron.compiles()] == [False]
    assert "[compile] torch.compile() with no backend -> backend='neuron'" in caplog.text


def test_cuda_modes_and_backends(shim: ModuleType, neuron: object, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    model, x = _net(), torch.randn(3, 4, device="neuron")
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        model.compile(mode="reduce-overhead")
        model(x)
        torch._dynamo.reset()
        torch.compile(_net(), backend="inductor", mode="max-autotune")(x)
    assert len(neuron.compiles()) == 2
    assert "torch.compile(mode='reduce-overhead') dropped" in caplog.text
    assert "torch.compile(mode='max-autotune') dropped" in caplog.text
    assert "torch.compile(backend='inductor') -> backend='neuron'" in caplog.text


def test_dynamic_true_becomes_static(shim: ModuleType, neuron: object, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    compiled = torch.compile(_net(), backend="neuron", dynamic=True)
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        for rows in (2, 3, 5):
            compiled(torch.randn(rows, 4, device="neuron"))
    assert [g.rejected for g in neuron.compiles()] == [False, False, False], "one static graph per shape"
    assert "torch.compile(dynamic=True) -> dynamic=False" in caplog.text


def test_explicit_choices_that_work_are_kept(shim: ModuleType, neuron: object) -> None:
    from torch._dynamo.backends import registry

    shim.apply()
    model, x = _net(), torch.randn(3, 4, device="neuron")
    torch.compile(model, backend="eager")(x)
    assert neuron.compiles() == []
    runtime_default = registry.get_default_backend()
    registry.set_default_backend("aot_eager")
    try:
        torch._dynamo.reset()
        torch.compile(model)(x)
    finally:
        registry.set_default_backend(runtime_default)
    assert neuron.compiles() == [], "a default backend the user set is theirs"


def test_user_compile_config_in_generate(shim: ModuleType, neuron: object, tiny_qwen: Path) -> None:
    """A user-built ``CompileConfig()`` carries inductor + reduce-overhead; decoding compiles for Neuron."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, CompileConfig

    shim.apply()
    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron")
    inputs = tokenizer(["the cat sat on"], return_tensors="pt")
    out = model.generate(
        **inputs,
        max_new_tokens=6,
        do_sample=False,
        cache_implementation="static",
        compile_config=CompileConfig(fullgraph=True),
    )
    reference = AutoModelForCausalLM.from_pretrained(tiny_qwen).generate(**inputs, max_new_tokens=6, do_sample=False)
    assert torch.equal(out.cpu(), reference)
    assert neuron.compiles() and not any(g.rejected for g in neuron.compiles())
