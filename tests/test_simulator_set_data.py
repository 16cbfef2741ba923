"""``tensor.data = other`` on the simulated device: as stock torch does for every PrivateUse1 device.

Stock torch 2.13 refuses ``.data =`` between the CPU and any PrivateUse1 device ("incompatible tensor type":
``c10/core/TensorImpl.h``, ``has_compatible_shallow_copy_type``, whose dense backends are CPU, CUDA, MPS, HIP,
XPU, HPU and MTIA). TorchNeuron is a PrivateUse1 plugin on stock torch and does not document overriding it, so
the simulator refuses it too (it used to accept it: a false pass, issue 33). On one device (the CPU, a core, or
two cores, as CUDA devices are one type) the assignment works and values follow.

The library paths that make that move for the user are fixed by the shim (patch ``cross_device_data``), which
works whether the device accepts or refuses: FSDP2's ``fully_shard`` and FSDP1 of a CPU-loaded model
(``_move_states_to_device``), PEFT's LoRA initialisations (OLoRA, PiSSA, ...) that assign a result computed
on the device to an adapter still on the CPU (found running PEFT's ``olora_finetuning.py``), and diffusers' group
offloading and ``unload_textual_inversion`` (``tests/test_patch_cross_device_data.py``,
``tests/test_simulator_diffusers.py``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from launch import free_port, run_ranks, simulated_env

REFUSED = "have incompatible tensor type"
SCRIPTS = Path(__file__).resolve().parent / "distributed"


def test_cpu_and_device_data_assignment_is_refused_as_stock_torch_does(neuron: object) -> None:
    parameter = torch.nn.Parameter(torch.zeros(3))
    with pytest.raises(RuntimeError, match=REFUSED):
        parameter.data = torch.ones(3, device="neuron")
    buffer = torch.zeros(3)  # what FSDP2's _move_states_to_device does to every CPU buffer
    with pytest.raises(RuntimeError, match=REFUSED):
        buffer.data = torch.ones(3, device="neuron")
    layer = torch.nn.Linear(4, 2).to("neuron")
    with pytest.raises(RuntimeError, match=REFUSED):
        layer.weight.data = torch.zeros(2, 4)
    assert parameter.device.type == buffer.device.type == "cpu" and layer.weight.device.type == "neuron"
    assert not torch._has_compatible_shallow_copy_type(torch.empty(0), torch.empty(0, device="neuron"))


def test_same_device_data_assignment_works_and_values_follow(neuron: object) -> None:
    layer = torch.nn.Linear(4, 2).to("neuron")
    kept = layer.weight
    kept.data = torch.ones(2, 4, device="neuron")
    assert layer.weight is kept and torch.equal(kept.detach().cpu(), torch.ones(2, 4))
    kept.data = torch.full((3, 4), 2.0, device="neuron:1")  # another core: one tensor type, as CUDA devices
    assert kept.device == torch.device("neuron:1") and kept.shape == (3, 4)
    assert torch.equal(kept.detach().cpu(), torch.full((3, 4), 2.0))
    rotary = torch.nn.Module()
    rotary.register_buffer("inv_freq", torch.arange(4.0, device="neuron"))
    rotary.inv_freq.data = rotary.inv_freq.data * 2
    assert rotary.inv_freq.device.type == "neuron" and rotary.inv_freq.tolist() == [0.0, 2.0, 4.0, 6.0]
    cpu = torch.nn.Parameter(torch.zeros(2))
    cpu.data = torch.ones(3)
    assert cpu.tolist() == [1.0, 1.0, 1.0]


def test_module_to_moves_across_the_cpu_and_the_device(neuron: object) -> None:
    """``Module.to`` replaces parameters of an incompatible type (torch's ``nn.Module._apply``): it works."""
    layer = torch.nn.BatchNorm1d(3)
    layer.to("neuron")
    assert {t.device.type for t in [*layer.parameters(), *layer.buffers()]} == {"neuron"}
    layer.to("cpu")
    assert {t.device.type for t in [*layer.parameters(), *layer.buffers()]} == {"cpu"}


@pytest.mark.parametrize(
    "module", ["torch.distributed.fsdp._fully_shard._fsdp_init", "torch.distributed.fsdp._init_utils"]
)
def test_fsdp_move_states_to_device_of_cpu_states_is_refused_without_the_shim(module: str, neuron: object) -> None:
    """What ``fully_shard`` (FSDP2) and FSDP1 with ``device_id`` do to a CPU model's states, as on a trn2."""
    import importlib

    fsdp = importlib.import_module(module)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    with pytest.raises(RuntimeError, match=REFUSED):
        fsdp._move_states_to_device(list(model.parameters()), list(model.buffers()), torch.device("neuron:1"))


@pytest.mark.slow  # two torchrun launches of two ranks
@pytest.mark.ranks
def test_fsdp2_fully_shard_of_a_cpu_model_with_batchnorm_buffers_on_two_ranks(tmp_path: Path) -> None:
    """The real ``fully_shard``: works with the shim, fails as on a trn2 without it."""

    def launch(**env: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
        command += ["--master_port", str(free_port()), "-m", "neuroncompat", str(SCRIPTS / "fsdp2_cpu_buffers.py")]
        return run_ranks(command, simulated_env(**env), tmp_path)

    shimmed = launch()
    assert shimmed.returncode == 0, shimmed.stderr[-4000:]
    for rank in (0, 1):
        assert (
            f'"rank": {rank}, "buffer_devices": ["neuron:{rank}"], "param_devices": ["neuron:{rank}"], '
            '"same_buffer_objects": true, "moved_values_kept": true, "running_mean_updated": true, '
            '"num_batches_tracked": 2}' in shimmed.stdout
        ), shimmed.stdout
    unshimmed = launch(NEURONCOMPAT_DISABLE="cross_device_data")
    assert unshimmed.returncode != 0 and REFUSED in unshimmed.stderr


def test_peft_olora_init_on_the_device_fails_without_the_shim_and_matches_the_cpu_with_it(
    shim: ModuleType, tiny_qwen: Path
) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    config = LoraConfig(r=4, task_type="CAUSAL_LM", init_lora_weights="olora", target_modules=["q_proj", "v_proj"])
    ids = torch.tensor([[1, 5, 9, 3]])
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map={"": "neuron"})
    with pytest.raises(RuntimeError, match=REFUSED):  # upstream, on the simulator as on a trn2
        get_peft_model(model, config)

    shim.apply()
    logits = {}
    for device in ("cpu", "neuron"):
        model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map={"": device})
        model = get_peft_model(model, config)
        lora = [p for n, p in model.named_parameters() if "lora_" in n]
        assert lora and all(p.device.type == device and p.requires_grad for p in lora)
        logits[device] = model(input_ids=ids.to(device)).logits.detach().cpu()
    torch.testing.assert_close(logits["neuron"], logits["cpu"])


def test_diffusers_unload_textual_inversion_on_the_device_fails_without_the_shim(neuron: object) -> None:
    pytest.importorskip("diffusers")
    from neuroncompat.testing import tiny_pipeline

    pipe = tiny_pipeline("sd").to("neuron")
    pipe.load_textual_inversion({"<cat>": torch.zeros(pipe.text_encoder.config.hidden_size)}, token="<cat>")
    with pytest.raises(RuntimeError, match=REFUSED):  # a CPU nn.Embedding given the device weights
        pipe.unload_textual_inversion()
