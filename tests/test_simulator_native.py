"""The simulated device as a native PrivateUse1 backend: what a script sees of its tensors.

Each test is a behaviour a user's script relied on and the old Python wrapper got wrong (issue
27's M1-M6, issue 22's allocator): recurrent layers, ``buffer.data =``, ``copy.deepcopy``,
format specs, pickled modules, CUDA-style memory statistics, the out-of-memory error.
"""

from __future__ import annotations

import copy
import io
import os
import subprocess
import sys

import pytest
import torch


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
def test_recurrent_layers_train_and_match_the_cpu(neuron: object, cls: type[torch.nn.Module]) -> None:
    torch.manual_seed(0)
    cpu = cls(8, 16, num_layers=2, bidirectional=True)  # type: ignore[call-arg]
    device = copy.deepcopy(cpu).to("neuron")
    x = torch.randn(5, 3, 8)
    out, _ = cpu(x)
    out_d, _ = device(x.to("neuron"))
    (out**2).sum().backward()
    (out_d**2).sum().backward()
    assert out_d.device.type == "neuron"
    torch.testing.assert_close(out_d.cpu(), out, rtol=1e-5, atol=1e-6)
    for p, q in zip(cpu.parameters(), device.parameters(), strict=True):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.nn.Conv1d(3, 4, 3, padding=1),
        lambda: torch.nn.Conv2d(3, 4, 3, stride=2, groups=1, bias=False),
        lambda: torch.nn.Conv2d(4, 4, 3, groups=2, dilation=2),
        lambda: torch.nn.Conv3d(3, 2, 2),
        lambda: torch.nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=1),
    ],
    ids=["conv1d", "conv2d-strided", "conv2d-grouped-dilated", "conv3d", "conv-transpose2d"],
)
def test_convolutions_are_the_cpus_bit_for_bit(neuron: object, make: object) -> None:
    """Convolutions dispatch to ``convolution_overrideable`` on a PrivateUse1 device: the
    simulator must run the CPU's own kernel there, forward and backward (a CNN's MNIST-style loop
    trains exactly as on the CPU)."""
    torch.manual_seed(0)
    cpu = make()  # type: ignore[operator]
    device = copy.deepcopy(cpu).to("neuron")
    dims = {torch.nn.Conv1d: 1, torch.nn.Conv2d: 2, torch.nn.Conv3d: 3, torch.nn.ConvTranspose2d: 2}
    x = torch.randn(2, cpu.in_channels, *[7] * dims[type(cpu)], requires_grad=True)
    x_d = x.detach().to("neuron").requires_grad_()
    out, out_d = cpu(x), device(x_d)
    out.square().sum().backward()
    out_d.square().sum().backward()
    assert out_d.device.type == "neuron"
    assert torch.equal(out_d.cpu(), out)
    assert torch.equal(x_d.grad.cpu(), x.grad)
    for p, q in zip(cpu.parameters(), device.parameters(), strict=True):
        assert torch.equal(q.grad.cpu(), p.grad)


def test_lstm_cell_in_bf16(neuron: object) -> None:
    cell = torch.nn.LSTMCell(8, 16).to("neuron", torch.bfloat16)
    h, c = cell(torch.randn(3, 8, device="neuron", dtype=torch.bfloat16))
    (h.float().sum() + c.float().sum()).backward()
    assert h.dtype == c.dtype == torch.bfloat16 and cell.weight_ih.grad is not None


def test_plain_buffer_data_assignment_across_the_cpu_is_refused_as_stock_torch(neuron: object) -> None:
    """FSDP's ``_move_states_to_device`` sets ``buffer.data`` on every CPU buffer: refused for every PrivateUse1
    device (tests/test_simulator_set_data.py; the shim's ``cross_device_data`` patch moves them instead)."""
    buf = torch.zeros(3)
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        buf.data = torch.ones(3, device="neuron")
    rotary = torch.nn.Module()
    rotary.register_buffer("inv_freq", torch.arange(4.0))
    rotary.to("neuron")  # Module.to works: it replaces what it cannot assign
    rotary.inv_freq.data = rotary.inv_freq.data * 2  # one device: values follow
    assert rotary.inv_freq.device.type == "neuron" and rotary.inv_freq.tolist() == [0.0, 2.0, 4.0, 6.0]


def test_deepcopy_and_resize_keep_shapes(neuron: object) -> None:
    model = torch.nn.Linear(4, 2).to("neuron")
    ema = copy.deepcopy(model)
    assert ema.weight.shape == (2, 4) and ema.weight.device == model.weight.device
    assert torch.equal(ema.weight.cpu(), model.weight.cpu())
    assert copy.deepcopy(model.weight.detach()).shape == (2, 4)
    x = torch.empty(0, device="neuron")
    x.resize_(3, 4)
    assert x.shape == (3, 4)
    y = torch.empty(0, device="neuron")
    y.set_(torch.zeros(2, 5, device="neuron"))
    assert y.shape == (2, 5)


def test_format_spec_on_a_scalar_tensor(neuron: object) -> None:
    loss = torch.tensor(3.14159, device="neuron")
    assert f"{loss:.2f}" == "3.14"
    assert f"{loss}" == f"{torch.tensor(3.14159)}"  # a 0-d tensor formats as its item, as on the CPU


def test_pickled_module_loads_back_on_its_core(neuron: object) -> None:
    model = torch.nn.Linear(3, 2).to("neuron:1")
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert loaded.weight.device == torch.device("neuron:1")
    buffer.seek(0)
    moved = torch.load(buffer, weights_only=False, map_location="neuron:0")
    assert moved.weight.device == torch.device("neuron:0")
    assert torch.equal(moved.weight.cpu(), model.weight.cpu())


@pytest.mark.device_stats
def test_memory_statistics_count_bytes_as_the_caching_allocator_does(own_core: int) -> None:
    base = torch.accelerator.memory_allocated(own_core)
    a = torch.empty(1000, dtype=torch.uint8, device="neuron")  # rounded up to 1024 (512-byte blocks)
    b = torch.empty(256, 256, device="neuron")  # 256 KiB
    assert a.device.index == own_core
    assert torch.accelerator.memory_allocated() - base == 1024 + 256 * 1024
    assert torch.accelerator.max_memory_allocated() - base == 1024 + 256 * 1024
    del b
    assert torch.accelerator.memory_allocated() - base == 1024
    assert torch.accelerator.memory_reserved() > torch.accelerator.memory_allocated(), "freed blocks stay cached"
    torch.neuron.empty_cache()
    assert torch.accelerator.max_memory_allocated() - base == 1024 + 256 * 1024
    stats = torch.neuron.memory_stats()
    for key in (
        "allocated_bytes.all.current",
        "allocated_bytes.all.peak",
        "active_bytes.all.peak",
        "reserved_bytes.all.current",
        "num_alloc_retries",
        "num_ooms",
    ):
        assert key in stats, key
    assert "Allocated memory" in torch.neuron.memory_summary()
    del a


@pytest.mark.device_stats
def test_cores_keep_separate_statistics(own_core: int) -> None:
    """3 MiB on the test's own core: the core beside it, which no thread uses either, must not see a byte of it."""
    other = own_core - 1
    size = 3 << 20
    before_other, before_own = torch.accelerator.memory_allocated(other), torch.accelerator.memory_allocated(own_core)
    on_own = torch.empty(size, dtype=torch.uint8, device=f"neuron:{own_core}")
    assert torch.accelerator.memory_allocated(own_core) - before_own == size
    assert torch.accelerator.memory_allocated(other) == before_other
    del on_own


def test_out_of_memory_is_worded_like_the_runtime() -> None:
    """A core's memory is bounded (24 GiB on trn2; here set small) and running out is an OOM."""
    script = (
        "import neuroncompat.simulator as s; s.enable()\n"
        "import torch\n"
        "keep = [torch.empty(1 << 20, dtype=torch.uint8, device='neuron') for _ in range(3)]\n"
        "try:\n"
        "    torch.empty(2 << 20, dtype=torch.uint8, device='neuron')\n"
        "except torch.OutOfMemoryError as e:\n"
        "    print('OOM', e)\n"
    )
    env = {**os.environ, "NEURONCOMPAT_SIMULATE_CORE_MEMORY": "4MiB"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OOM "), done.stdout
    assert "Tried to allocate 2.00 MiB. NeuronCore 0 has a total capacity of 4.00 MiB" in done.stdout
    assert "NEURONCOMPAT_SIMULATE_CORE_MEMORY" in done.stdout


def test_storages_know_their_device(neuron: object) -> None:
    t = torch.ones(4, device="neuron")
    assert t.untyped_storage().is_neuron and t.untyped_storage().device == torch.device("neuron:0")
    assert not torch.ones(4).untyped_storage().is_neuron
    assert type(t) is torch.Tensor


def test_quantized_ops_are_refused_as_not_supported(neuron: object) -> None:
    x = torch.randn(4, device="neuron")
    with pytest.raises(NotImplementedError, match="quantize_per_tensor"):
        torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)


def test_pinned_host_memory_is_pinned_and_copies_to_the_device(neuron: object) -> None:
    pinned = torch.arange(4.0).pin_memory()
    assert pinned.is_pinned() and pinned.device.type == "cpu"
    assert pinned.to("neuron", non_blocking=True).cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
