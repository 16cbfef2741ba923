"""``torch.histc`` of integer tensors on the simulated device (transformers' grouped_mm MoE experts).

The CPU has no integer ``histc``; the simulator counts as CUDA does (neuroncompat/simulator/integer_histc.py).
"""

from __future__ import annotations

import pytest
import torch


def test_the_cpu_has_no_integer_histc() -> None:
    with pytest.raises(NotImplementedError, match="histogram_cpu"):
        torch.histc(torch.tensor([0, 1, 1], dtype=torch.int32), bins=2, min=0, max=1)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32])
def test_counts_equal_the_float_histogram_in_the_input_dtype(neuron: object, dtype: torch.dtype) -> None:
    ids = torch.tensor([3, 0, 1, 1, 3, 3, 7, 2], dtype=dtype)
    counts = torch.histc(ids.to("neuron"), bins=4, min=0, max=3)  # 7 is out of range: dropped, as on CUDA
    assert counts.device.type == "neuron" and counts.dtype == dtype
    assert counts.cpu().tolist() == [1, 2, 1, 3]


def test_the_moe_experts_of_transformers_match_the_cpu(neuron: object) -> None:
    from transformers import AutoModelForCausalLM, Qwen3MoeConfig

    config = Qwen3MoeConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, num_experts=4, num_experts_per_tok=2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    ids = torch.randint(0, 64, (2, 8))
    cpu = model(ids, labels=ids).loss
    model.to("neuron")
    assert model.config._experts_implementation == "grouped_mm"
    device = model(ids.to("neuron"), labels=ids.to("neuron")).loss
    torch.testing.assert_close(device.cpu(), cpu)
