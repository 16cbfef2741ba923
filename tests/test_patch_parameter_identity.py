"""``parameter_identity``: an optimizer made before ``model.to("neuron")`` trains the model, as on CUDA.

The simulated device refuses ``.data =`` across the CPU and a core, as stock torch does for every PrivateUse1
device, so without the patch ``nn.Module._apply`` replaces each parameter on the move (asserted below: that is
the gap). Every test checks what a user sees: the same parameter objects, the optimizer's step changing the
model, the log line, and the warning where identity cannot be kept.
"""

from __future__ import annotations

import logging
import weakref
from types import ModuleType

import pytest
import torch

transformers = pytest.importorskip("transformers")


def _train_one_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, device: str) -> None:
    x = torch.arange(12.0, device=device).reshape(3, 4) / 10
    model(x).square().sum().backward()
    optimizer.step()


def test_without_the_patch_the_move_replaces_parameters_and_the_optimizer_trains_nothing(neuron: object) -> None:
    model = torch.nn.Linear(4, 4)
    weight = model.weight
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model.to("neuron")
    assert model.weight is not weight and weight.device.type == "cpu"
    before = model.weight.detach().cpu().clone()
    _train_one_step(model, optimizer, "neuron")
    assert torch.equal(model.weight.detach().cpu(), before)  # the step updated the stale CPU tensor only


def test_an_optimizer_made_before_the_move_trains_the_model(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    reference = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    reference.load_state_dict(model.state_dict())
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=0.1)
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        model.to("neuron")
    assert list(model.parameters()) == params and all(p.device == torch.device("neuron:0") for p in params)
    assert all(isinstance(p, torch.nn.Parameter) and p.requires_grad for p in params)
    assert caplog.text.count("[parameter_identity]") == 1 and "swap_tensors" in caplog.text
    for _ in range(2):
        _train_one_step(model, optimizer, "neuron")
        _train_one_step(reference, reference_optimizer, "cpu")
    for ours, cpu in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours.detach().cpu(), cpu.detach())


def test_back_to_the_cpu_and_to_a_core_by_name_keep_objects_and_gradients(shim: ModuleType) -> None:
    shim.apply()
    model = torch.nn.Linear(3, 3)
    weight = model.weight
    model.neuron(1)
    model(torch.ones(2, 3, device="neuron:1")).sum().backward()
    model.cpu()
    assert model.weight is weight and weight.device.type == "cpu"
    assert (
        weight.grad is not None
        and weight.grad.device.type == "cpu"
        and torch.equal(weight.grad, torch.full((3, 3), 2.0))
    )
    model.to(device="neuron:0", dtype=torch.float64)
    assert model.weight is weight and weight.device == torch.device("neuron:0") and weight.dtype == torch.float64


def test_tied_weights_stay_tied_and_the_model_generates_as_on_the_cpu(shim: ModuleType) -> None:
    shim.apply()
    config = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    embedding = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight is embedding
    prompt = torch.tensor([[3, 5, 7, 9]])
    expected = model.generate(prompt, max_new_tokens=4, do_sample=False)
    model.to("neuron")
    assert model.get_input_embeddings().weight is embedding is model.get_output_embeddings().weight
    assert embedding.device.type == "neuron"
    tokens = model.generate(prompt.to("neuron"), max_new_tokens=4, do_sample=False)
    assert torch.equal(tokens.cpu(), expected)


def test_the_users_choice_of_replacing_parameters_is_kept(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    model = torch.nn.Linear(2, 2)
    weight = model.weight
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        with caplog.at_level(logging.INFO, logger="neuroncompat"):
            model.to("neuron")
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(False)
    assert model.weight is not weight and "[parameter_identity]" not in caplog.text


def test_a_parameter_that_cannot_be_swapped_is_replaced_with_a_warning(
    shim: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    shim.apply()
    model = torch.nn.Linear(2, 2)
    watched = weakref.ref(model.bias)  # swap_tensors refuses a tensor with weak references
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        model.to("neuron")
    assert model.bias is not watched() and model.bias.device.type == "neuron"
    assert "build the optimizer after the move" in caplog.text and "weakref" in caplog.text


def test_an_lstm_keeps_its_parameters_and_trains_as_on_the_cpu(
    shim: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """``nn.LSTM`` holds weak references to its weights; ``RNNBase._apply`` drops them before the swap."""
    shim.apply()
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4, batch_first=True)
    reference = torch.nn.LSTM(3, 4, batch_first=True)
    reference.load_state_dict(lstm.state_dict())
    params = list(lstm.parameters())
    optimizer = torch.optim.SGD(lstm.parameters(), lr=0.5)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        lstm.to("neuron")
    assert list(lstm.parameters()) == params and "WARNING" not in caplog.text
    x = torch.linspace(-1, 1, 2 * 5 * 3).reshape(2, 5, 3)
    for model, opt, device in ((lstm, optimizer, "neuron"), (reference, reference_optimizer, "cpu")):
        model(x.to(device))[0].square().sum().backward()
        opt.step()
    for ours, cpu in zip(lstm.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours.detach().cpu(), cpu.detach())


def test_moves_on_one_device_are_torchs_own(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    model = torch.nn.Linear(2, 2)
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        model.to(torch.float64)  # on the CPU
        model.to("neuron:0").to("neuron:1")  # between two cores torch assigns `.data` itself
        weight = model.weight
        model.to("neuron:0")
    assert model.weight is weight and caplog.text.count("[parameter_identity]") == 1  # the first move only
