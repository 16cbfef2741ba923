"""``param.data = tensor`` between the CPU and the simulated device moves the parameter, as on hardware.

Found running PEFT's ``olora_finetuning.py`` on the simulator: OLoRA initialises a LoRA weight still on the CPU
with ``weight.data = R`` where ``R`` came from the base weight on the device, and the simulator raised
``incompatible tensor type`` (on CUDA, and torch-neuronx's regular TensorImpl, the assignment is allowed).
"""

from __future__ import annotations

import torch


def test_cpu_parameter_takes_device_data_and_stays_the_modules_parameter(neuron: object) -> None:
    base = torch.nn.Linear(8, 6, bias=False).to("neuron:1")
    adapter = torch.nn.Linear(8, 3, bias=False)  # created on the CPU, as PEFT creates LoRA layers
    weight = adapter.weight
    weight.marker = "kept"  # libraries tag parameters with attributes (HF's _is_hf_initialized, ...)
    _, r = torch.linalg.qr(base.weight.detach().float())  # R: 6 x 8
    weight.data = r[:3].contiguous()
    assert adapter.weight is weight and next(adapter.parameters()) is weight
    assert isinstance(weight, torch.nn.Parameter) and weight.requires_grad and weight.marker == "kept"
    assert weight.device == torch.device("neuron:1")
    assert torch.equal(weight.detach().cpu(), r[:3].cpu())
    adapter(torch.ones(2, 8, device="neuron:1")).sum().backward()  # trains where it now lives
    assert weight.grad is not None and weight.grad.device == torch.device("neuron:1")


def test_device_parameter_takes_cpu_data(neuron: object) -> None:
    layer = torch.nn.Linear(4, 2).to("neuron")
    layer.weight.data = torch.zeros(2, 4)
    assert layer.weight.device.type == "cpu" and isinstance(layer.weight, torch.nn.Parameter)
    same_device = torch.nn.Linear(4, 2).to("neuron")
    kept = same_device.weight
    kept.data = torch.ones(2, 4, device="neuron")  # compatible tensors: the ordinary set_data path
    assert same_device.weight is kept and torch.equal(kept.detach().cpu(), torch.ones(2, 4))


def test_peft_olora_init_on_the_device_matches_the_cpu(neuron: object, tiny_qwen) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    config = LoraConfig(r=4, task_type="CAUSAL_LM", init_lora_weights="olora", target_modules=["q_proj", "v_proj"])
    ids = torch.tensor([[1, 5, 9, 3]])
    logits = {}
    for device in ("cpu", "neuron"):
        model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map={"": device})
        model = get_peft_model(model, config)
        lora = [p for n, p in model.named_parameters() if "lora_" in n]
        assert lora and all(p.device.type == device and p.requires_grad for p in lora)
        logits[device] = model(input_ids=ids.to(device)).logits.detach().cpu()
    torch.testing.assert_close(logits["neuron"], logits["cpu"])
