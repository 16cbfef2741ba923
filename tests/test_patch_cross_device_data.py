"""``cross_device_data``: FSDP and PEFT's LoRA inits move CPU tensors onto a NeuronCore, whatever ``.data =`` does.

Stock torch refuses ``tensor.data = other`` between the CPU and any PrivateUse1 device; these tests hold
whether the device refuses it (the simulator, as stock torch) or accepts it: only the results are checked.
``tests/test_simulator_set_data.py`` shows the same library paths failing without the patch, and runs FSDP2's
``fully_shard`` of a CPU model on two ranks with and without it.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from types import ModuleType

import pytest
import torch

from neuroncompat.patches.cross_device_data import swap_onto

FSDP_MODULES = ["torch.distributed.fsdp._fully_shard._fsdp_init", "torch.distributed.fsdp._init_utils"]


def cpu_states() -> tuple[list[torch.nn.Parameter], list[torch.Tensor]]:
    """A CPU model's parameters and BatchNorm buffers, a parameter tagged and with a gradient."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    with torch.no_grad():
        model[1].running_mean.fill_(0.5)
    model[0].weight.tag = "kept"  # libraries tag parameters with attributes (HF's _is_hf_initialized, ...)
    model[0].weight.grad = torch.ones(3, 4)
    return list(model.parameters()), list(model.buffers())


@pytest.mark.parametrize("module", FSDP_MODULES)
def test_fsdp_move_states_to_device_moves_cpu_states_onto_the_core(
    module: str, shim: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    fsdp = importlib.import_module(module)
    shim.apply()
    params, buffers = cpu_states()
    states = [*params, *buffers]
    ids = [id(t) for t in states]
    expected = [t.detach().clone() for t in states]
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        fsdp._move_states_to_device(params, buffers, torch.device("neuron:1"))
    assert [id(t) for t in states] == ids
    assert all(t.device == torch.device("neuron:1") for t in states)
    assert all(torch.equal(t.detach().cpu(), e) for t, e in zip(states, expected, strict=True))
    weight = params[0]
    assert isinstance(weight, torch.nn.Parameter) and weight.requires_grad and weight.tag == "kept"
    if module == FSDP_MODULES[1]:  # FSDP1 moves gradients too (FSDP2 upstream leaves them where they are)
        assert weight.grad is not None and weight.grad.device == weight.device
    assert not isinstance(buffers[0], torch.nn.Parameter) and not buffers[0].requires_grad
    assert caplog.text.count("[cross_device_data]") <= 1  # one line where the device refuses, none where not
    assert shim.status()["cross_device_data"].state == "applied"


def test_swap_onto_keeps_the_object_its_attributes_and_gradient(neuron: object) -> None:
    weight = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3))
    weight.tag = "kept"
    weight.grad = torch.ones(2, 3)
    assert swap_onto(weight, torch.device("neuron:1"))
    assert isinstance(weight, torch.nn.Parameter) and weight.requires_grad and weight.tag == "kept"
    assert weight.device == torch.device("neuron:1") and weight.grad.device == weight.device
    assert torch.equal(weight.detach().cpu(), torch.arange(6.0).reshape(2, 3))
    buffer = torch.zeros(3)
    assert swap_onto(buffer, torch.device("neuron")) and buffer.device.type == "neuron" and not buffer.requires_grad

    class Marked(torch.Tensor):
        pass

    marked = torch.zeros(2).as_subclass(Marked)
    assert not swap_onto(marked, torch.device("neuron")) and marked.device.type == "cpu"  # left to the caller


@pytest.mark.parametrize("init", ["olora", "pissa"])
def test_peft_lora_init_on_the_core_matches_the_cpu(init: str, shim: ModuleType, tiny_qwen: Path) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    shim.apply()
    config = LoraConfig(r=4, task_type="CAUSAL_LM", init_lora_weights=init, target_modules=["q_proj", "v_proj"])
    ids = torch.tensor([[1, 5, 9, 3]])
    logits = {}
    for device in ("cpu", "neuron:1"):
        model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map={"": device})
        model = get_peft_model(model, config)
        lora = [p for n, p in model.named_parameters() if "lora_" in n]
        assert lora and all(p.device == torch.device(device) and p.requires_grad for p in lora)
        logits[device] = model(input_ids=ids.to(device)).logits.detach().cpu()
    torch.testing.assert_close(logits["neuron:1"], logits["cpu"])


def test_other_devices_and_inits_are_untouched(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    from peft import LoraConfig, get_peft_model

    shim.apply()
    fsdp = importlib.import_module(FSDP_MODULES[0])
    params, buffers = cpu_states()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        fsdp._move_states_to_device(params, buffers, torch.device("cpu"))
        base = torch.nn.Sequential(torch.nn.Linear(4, 4))
        get_peft_model(base, LoraConfig(r=2, init_lora_weights="olora", target_modules=["0"]))
    assert all(t.device.type == "cpu" for t in [*params, *buffers])
    assert "[cross_device_data]" not in caplog.text


def test_disabled_by_name(shim: ModuleType) -> None:
    shim.apply(skip=["cross_device_data"])
    assert shim.status()["cross_device_data"].state == "disabled"
    fsdp = importlib.import_module(FSDP_MODULES[0])
    assert "cross_device_data" not in fsdp._move_states_to_device.__code__.co_filename


class Blocks(torch.nn.Module):
    """Three blocks with BatchNorm buffers and a head: what diffusers' group offloading splits."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            [torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)) for _ in range(3)]
        )
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


GROUP_OFFLOADS = {
    "block": {"offload_type": "block_level", "num_blocks_per_group": 1},
    "block-stream": {"offload_type": "block_level", "num_blocks_per_group": 1, "use_stream": True},
    "leaf": {"offload_type": "leaf_level"},
    "leaf-stream": {"offload_type": "leaf_level", "use_stream": True},
    "block-disk": {"offload_type": "block_level", "num_blocks_per_group": 1, "offload_to_disk_path": "DISK"},
}


@pytest.mark.parametrize("offload", sorted(GROUP_OFFLOADS))
def test_diffusers_group_offloading_onto_the_core_matches_the_cpu(
    offload: str, shim: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("diffusers")
    from diffusers.hooks import apply_group_offloading

    shim.apply()
    torch.manual_seed(0)
    reference = Blocks().eval()
    x = torch.randn(5, 4)
    expected = reference(x)
    model = Blocks().eval()
    model.load_state_dict(reference.state_dict())
    options: dict[str, object] = dict(GROUP_OFFLOADS[offload])
    if options.get("offload_to_disk_path"):
        options["offload_to_disk_path"] = str(tmp_path)
    apply_group_offloading(model, onload_device=torch.device("neuron"), **options)  # type: ignore[arg-type]
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="neuroncompat"):
        for _ in range(2):  # onloaded and offloaded twice
            torch.testing.assert_close(model(x.to("neuron")).cpu(), expected)
    assert {p.device.type for p in model.parameters()} == {"cpu"}  # offloaded again (with streams, not buffers)
    assert caplog.text.count("[cross_device_data] diffusers group offloading") <= 1


def test_diffusers_unload_textual_inversion_on_the_core(shim: ModuleType) -> None:
    pytest.importorskip("diffusers")
    from neuroncompat.testing import tiny_pipeline

    shim.apply()
    pipe = tiny_pipeline("sd").to("neuron")
    embeddings = pipe.text_encoder.get_input_embeddings()
    pipe.load_textual_inversion({"<cat>": torch.randn(embeddings.embedding_dim)}, token="<cat>")
    loaded = pipe.text_encoder.get_input_embeddings().weight.detach().cpu()
    pipe.unload_textual_inversion()
    weight = pipe.text_encoder.get_input_embeddings().weight
    assert isinstance(weight, torch.nn.Parameter) and weight.device == torch.device("neuron:0")
    assert torch.equal(weight.detach().cpu(), loaded[:-1])  # the added token's row removed
