"""The simulated device behaves like an accelerator to PyTorch code."""

from __future__ import annotations

import io

import pytest
import torch
from helpers import run_python


def test_factories_transfers_and_device_index(neuron: object) -> None:
    z = torch.zeros(2, 3, device="neuron")
    assert z.device == torch.device("neuron", 0)
    assert torch.arange(4, device="neuron:1").device == torch.device("neuron", 1)
    assert torch.tensor([1, 2], device=torch.device("neuron", 1)).device.index == 1
    x = torch.randn(3)
    on_core1 = x.to("neuron:1")
    assert on_core1.device.index == 1
    assert (on_core1 * 2).device.index == 1
    back = on_core1.cpu()
    assert type(back) is torch.Tensor and back.device.type == "cpu"
    assert torch.equal(back, x)
    assert on_core1.sum().item() == pytest.approx(x.sum().item())
    assert on_core1.tolist() == x.tolist()


def test_views_and_in_place_ops_alias(neuron: object) -> None:
    base = torch.zeros(2, 3, device="neuron")
    view = base.view(-1)
    view.add_(1)
    base[0, 0] = 5
    assert base.cpu().tolist() == [[5.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    assert view.cpu()[0].item() == 5.0
    out = torch.empty(3, device="neuron")
    result = torch.add(torch.ones(3, device="neuron"), 1, out=out)
    assert result is out and out.cpu().tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("core", [0, 1])
def test_autograd_and_optimizer_step_match_cpu(neuron: object, core: int) -> None:
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 1))
    dev_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 1))
    dev_model.load_state_dict(cpu_model.state_dict())
    dev_model.to(f"neuron:{core}")
    assert all(
        p.device == torch.device("neuron", core) and isinstance(p, torch.nn.Parameter) for p in dev_model.parameters()
    )
    data = torch.randn(5, 4)
    for model, x in ((cpu_model, data), (dev_model, data.to(f"neuron:{core}"))):
        opt = torch.optim.AdamW(model.parameters(), lr=0.1)
        model(x).pow(2).mean().backward()
        opt.step()
    for a, b in zip(cpu_model.parameters(), dev_model.parameters()):
        assert b.grad is not None and b.grad.device == torch.device("neuron", core)
        assert torch.allclose(a, b.cpu())


def test_backward_after_a_cpu_backward_in_the_same_process() -> None:
    """A script may train on CPU before it enables the device; later neuron backwards still work."""
    result = run_python(
        """
        import torch
        torch.nn.Linear(2, 2)(torch.randn(1, 2)).sum().backward()
        from neuroncompat import simulator
        simulator.enable(cores=2)
        for core in (0, 1):
            w = torch.ones(3, device=f"neuron:{core}", requires_grad=True)
            (w * w).sum().backward()
            print(w.grad.device, w.grad.cpu().tolist())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["neuron:0 [2.0, 2.0, 2.0]", "neuron:1 [2.0, 2.0, 2.0]"]


def test_mixing_devices_fails_as_on_hardware(neuron: object) -> None:
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*neuron:0 and cpu"):
        torch.ones(3, device="neuron") + torch.ones(3)
    with pytest.raises(RuntimeError, match="neuron:0 and neuron:1"):
        torch.ones(3, device="neuron:0") + torch.ones(3, device="neuron:1")
    # A CPU scalar and host-side indices are fine, as on CUDA.
    t = torch.arange(5, device="neuron")
    assert (t * torch.tensor(2)).cpu().tolist() == [0, 2, 4, 6, 8]
    assert t[torch.tensor([0, 4])].cpu().tolist() == [0, 4]
    with pytest.raises(TypeError, match="Use Tensor.cpu"):
        t.numpy()


def test_save_load_restores_the_saved_core_as_cuda_does(neuron: object) -> None:
    """A checkpoint saved from neuron:1 loads back on neuron:1; map_location moves it (#27 M5)."""
    module = torch.nn.Linear(3, 2).to("neuron:1")
    buffer = io.BytesIO()
    torch.save({"state": module.state_dict(), "module": module}, buffer)
    for location, expected in ((None, "neuron:1"), ("cpu", "cpu"), ("neuron:0", "neuron:0")):
        buffer.seek(0)
        loaded = torch.load(buffer, map_location=location, weights_only=False)
        for name, value in loaded["state"].items():
            assert str(value.device) == expected
            assert torch.equal(value.cpu(), module.state_dict()[name].cpu())
        assert str(loaded["module"].weight.device) == expected
        assert loaded["module"].weight.untyped_storage().device.type == expected.split(":")[0]


def test_torch_neuron_module(neuron: object) -> None:
    assert torch.neuron.is_available() and torch.neuron.device_count() == 2
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device(1)
    try:
        assert torch.empty(1, device="neuron").device.index == 1
        assert torch.neuron.current_device() == 1
    finally:
        torch.neuron.set_device(0)
    props = torch.neuron.get_device_properties(0)
    assert props.total_memory > 0 and "NeuronCore" in props.name
    assert torch.neuron.get_device_name(1) == props.name
    assert torch.neuron.is_bf16_supported()
    assert not hasattr(torch.neuron, "mem_get_info"), "torch-neuronx has no mem_get_info (transformers #47029)"
    torch.neuron.synchronize()
    torch.neuron.empty_cache()
    with pytest.raises(RuntimeError, match="not a valid device"):
        torch.neuron.set_device(7)


@pytest.mark.device_stats
def test_memory_stats_follow_live_tensors(own_core: int) -> None:
    before = torch.neuron.memory_allocated()
    t = torch.empty(1024, 1024, device="neuron")  # 4 MiB, on the test's own core (the current one)
    assert t.device.index == own_core
    assert torch.neuron.memory_allocated() - before == 4 * 1024 * 1024
    view = t[:10]
    assert torch.neuron.memory_allocated() - before == 4 * 1024 * 1024, "a view allocates nothing"
    del t, view
    assert torch.neuron.memory_allocated() == before
    assert torch.neuron.max_memory_allocated() >= before + 4 * 1024 * 1024


def test_rng_is_per_device_and_seeded_by_manual_seed(neuron: object) -> None:
    torch.manual_seed(123)
    a = torch.randn(4, device="neuron").cpu()
    dropped = torch.nn.functional.dropout(torch.ones(64, device="neuron"), 0.5).cpu()
    torch.manual_seed(123)
    assert torch.equal(torch.randn(4, device="neuron").cpu(), a)
    assert torch.equal(torch.nn.functional.dropout(torch.ones(64, device="neuron"), 0.5).cpu(), dropped)
    state = torch.neuron.get_rng_state()
    cpu_state = torch.get_rng_state()
    first = torch.rand(3, device="neuron").cpu()
    assert torch.equal(torch.get_rng_state(), cpu_state), "device draws must not advance the CPU generator"
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.rand(3, device="neuron").cpu(), first)
    assert len(torch.neuron.get_rng_state_all()) == 2


def test_autocast_lowers_matmuls_only(neuron: object) -> None:
    a = torch.randn(4, 8, device="neuron")
    w = torch.nn.Linear(8, 8).to("neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert (a @ a.T).dtype == torch.bfloat16
        assert w(a).dtype == torch.bfloat16
        assert torch.softmax(a, -1).dtype == torch.float32
        assert (a + 1).dtype == torch.float32
    assert (a @ a.T).dtype == torch.float32


def test_compile_backend_records_static_then_dynamic_graph(neuron: object) -> None:
    import torch._dynamo

    model = torch.nn.Linear(4, 4).to("neuron")
    compiled = torch.compile(model, backend="neuron")
    for rows in (4, 8, 16):
        compiled(torch.randn(rows, 4, device="neuron"))
    graphs = neuron.compiles()
    assert [g.dynamic for g in graphs] == [False, True]
    assert graphs[1].rejected and not graphs[0].rejected
    assert any(spec.shape and isinstance(spec.shape[0], str) for spec in graphs[1].inputs)

    torch._dynamo.reset()
    neuron.reset_compiles()
    with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        compiled = torch.compile(model, backend="neuron")
        for rows in (4, 8, 16):
            compiled(torch.randn(rows, 4, device="neuron"))
    graphs = neuron.compiles()
    assert [g.dynamic for g in graphs] == [False, False, False]
    assert [g.inputs[-1].shape for g in graphs] == [(4, 4), (8, 4), (16, 4)]
    assert graphs[0].trigger.endswith("(test_compile_backend_records_static_then_dynamic_graph)")


def test_disable_makes_device_unavailable_to_libraries(neuron: object) -> None:
    from accelerate.utils import is_neuron_available
    from transformers.utils import is_torch_neuron_available

    assert is_torch_neuron_available() and is_neuron_available()
    neuron.disable()
    assert not torch.neuron.is_available()
    assert not is_torch_neuron_available() and not is_neuron_available()
    neuron.enable(cores=2)
    assert is_torch_neuron_available()


def test_env_var_enables_it_at_import() -> None:
    result = run_python(
        """
        import neuroncompat, torch
        print(torch.neuron.device_count(), torch.ones(1, device="neuron").device)
        """,
        env={"NEURONCOMPAT_SIMULATE": "1", "NEURONCOMPAT_SIMULATE_CORES": "4"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["4", "neuron:0"]


def _fake_torch_neuronx(root, body: str, requires: str = "") -> None:
    pkg = root / "torch_neuronx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(body)
    info = root / "torch_neuronx-2.13.3.0.dist-info"
    info.mkdir()
    meta = "Metadata-Version: 2.1\nName: torch-neuronx\nVersion: 2.13.3.0\n" + requires
    (info / "METADATA").write_text(meta)


def test_refuses_where_real_torch_neuronx_is_installed(tmp_path) -> None:
    _fake_torch_neuronx(tmp_path, "# TorchNeuron\n")
    result = run_python(
        "from neuroncompat import simulator; simulator.enable()",
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert result.returncode != 0
    assert "refusing to simulate Neuron: a real torch-neuronx is installed (native, 2.13.3.0)" in result.stderr


def test_pypi_placeholder_is_detected_not_imported(tmp_path) -> None:
    _fake_torch_neuronx(tmp_path, 'raise ImportError("WRONG PACKAGE: install torch-neuronx from the AWS repository")\n')
    result = run_python(
        """
        from neuroncompat.detect import detect_torch_neuronx
        from neuroncompat import simulator
        print(detect_torch_neuronx().kind)
        simulator.enable()
        print(detect_torch_neuronx().kind)
        """,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["placeholder", "simulated"]


def test_index_less_neuron_means_the_current_core(neuron: object) -> None:
    """After ``set_device(1)`` every way of saying ``"neuron"`` lands on core 1, as on a rank-1 trn2 process."""
    torch.neuron.set_device(1)
    try:
        assert torch.ones(2).to("neuron").device.index == 1
        assert torch.ones(2).to(device=torch.device("neuron"), dtype=torch.float16).device.index == 1
        assert torch.ones(2, device="neuron:0").to("neuron").device.index == 1
        assert torch.nn.Linear(2, 2).to("neuron").weight.device.index == 1
        assert torch.tensor([1.0], device="neuron").device.index == 1
        assert torch.as_tensor([1.0], device="neuron").device.index == 1
        assert torch.ones(2, device="neuron").device.index == 1
        with torch.device("neuron"):
            assert torch.tensor([1.0]).device.index == torch.as_tensor([1.0]).device.index == 1
            assert torch.zeros(1).device.index == 1
        assert torch.accelerator.current_device_index() == 1
        with torch.accelerator.device_index(0):
            assert torch.ones(2).to("neuron").device.index == 0
            assert torch.neuron.current_device() == 0
        assert torch.accelerator.current_device_index() == 1
        torch.accelerator.set_device_index(0)
        assert torch.neuron.current_device() == 0
        torch.accelerator.synchronize()
        torch.accelerator.synchronize("neuron:1")
        with torch.device("meta"):  # transformers detects a meta-device context with torch.tensor([])
            assert torch.tensor([]).device.type == torch.as_tensor([1.0]).device.type == "meta"
    finally:
        torch.neuron.set_device(0)


def test_streams_and_events_are_on_the_current_core(neuron: object) -> None:
    """FSDP2 and accelerate compare a stream's device with the tensor's: rank 1's streams are core 1's."""
    torch.neuron.set_device(1)
    try:
        assert torch.neuron.current_stream().device_index == 1
        assert torch.accelerator.current_stream().device_index == 1
        assert torch.Stream(device="neuron").device_index == 1
        assert torch.neuron.Stream("neuron:0").device_index == 0
        assert torch.accelerator.current_stream(0).device_index == 0
        event = torch.Event(device="neuron")
        event.record(torch.neuron.current_stream())
        event.synchronize()
        assert event.query()
        assert torch.accelerator.device_count() == 2
    finally:
        torch.neuron.set_device(0)


def test_device_generator_draws_reproducibly_from_its_seed_and_offset(neuron: object) -> None:
    """``torch.Generator(device="neuron")`` (diffusers' pipelines, samplers): a 16-byte seed+offset state."""
    torch.neuron.set_device(1)
    try:
        gen = torch.Generator(device="neuron")
    finally:
        torch.neuron.set_device(0)
    assert gen.device == torch.device("neuron", 1)
    assert torch.Generator(device="neuron:0").device == torch.device("neuron", 0)
    assert gen.initial_seed() != torch.Generator(device="neuron").initial_seed(), "unseeded: a random seed"
    gen.manual_seed(42)
    state = gen.get_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    assert state[:8].view(torch.uint64).item() == 42 and state[8:].view(torch.int64).item() == 0
    first = torch.randn(2, 3, generator=gen, device="neuron:1")
    assert first.device == torch.device("neuron", 1) and gen.get_offset() == 8  # 6 values, rounded up to 4
    second = torch.randn(2, 3, generator=gen, device="neuron:1")
    assert not torch.equal(first.cpu(), second.cpu())
    gen.set_state(state)
    assert torch.equal(torch.randn(2, 3, generator=gen, device="neuron:1").cpu(), first.cpu())
    torch.neuron.manual_seed(42)  # the core's own generator at the same (seed, offset) draws the same values
    assert torch.equal(torch.randn(2, 3, device="neuron").cpu(), first.cpu())
    assert torch.equal(gen.clone_state().get_state(), gen.get_state())
    with pytest.raises(RuntimeError, match="16 bytes"):
        gen.set_state(torch.zeros(5, dtype=torch.uint8))


def test_compiled_code_sees_the_current_core(neuron: object) -> None:
    """``torch.tensor(..., device="neuron")`` traced by Dynamo, and an empty device tensor as a graph input."""
    import torch._dynamo

    torch._dynamo.reset()
    neuron.reset_compiles()

    @torch.compile(backend="neuron", fullgraph=True)
    def shift(x: torch.Tensor) -> torch.Tensor:
        return x + torch.tensor([1.0], device="neuron")

    @torch.compile(backend="neuron", fullgraph=True)
    def grow(cache: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        return torch.cat([cache, new])  # transformers' DynamicLayer starts from torch.tensor([])

    torch.neuron.set_device(1)
    try:
        out = shift(torch.ones(2, device="neuron"))
        assert out.device == torch.device("neuron", 1) and out.cpu().tolist() == [2.0, 2.0]
        grown = grow(torch.tensor([], device="neuron"), torch.ones(2, device="neuron"))
        assert grown.device == torch.device("neuron", 1) and grown.cpu().tolist() == [1.0, 1.0]
    finally:
        torch.neuron.set_device(0)
    assert len(neuron.compiles()) == 2


def test_without_a_compiler_enabling_says_how_to_install_one(tmp_path) -> None:
    """No C++ compiler: one clear error naming the compiler looked for and how to get one."""
    result = run_python(
        "from neuroncompat import simulator; simulator.enable(cores=2)",
        env={"CXX": str(tmp_path / "no-such-compiler"), "NEURONCOMPAT_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert result.returncode != 0
    assert "needs a C++20 compiler" in result.stderr and "apt-get install g++" in result.stderr
    assert "no-such-compiler" in result.stderr


def test_data_ptr_points_into_the_storage_so_safetensors_saves(neuron: object, tmp_path) -> None:
    from safetensors.torch import load_file, save_model

    t = torch.arange(6.0, device="neuron:1").reshape(2, 3)
    assert t.data_ptr() == t.untyped_storage().data_ptr() != 0
    assert t[1].data_ptr() == t.data_ptr() + 3 * t.element_size()
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)).to("neuron")
    save_model(model, str(tmp_path / "model.safetensors"))
    loaded = load_file(str(tmp_path / "model.safetensors"))
    assert all(torch.equal(loaded[k], v.cpu()) for k, v in model.state_dict().items())


def test_rng_state_is_cuda_style_seed_and_offset(neuron: object) -> None:
    """16 bytes, seed then offset, which DTensor's RNG tracker rewrites to place each shard's draws."""
    torch.neuron.manual_seed(1234)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu" and state.numel() == 16
    assert state[:8].view(torch.uint64).item() == 1234 and state[8:].view(torch.int64).item() == 0
    first = torch.rand(6, device="neuron").cpu()
    assert torch.neuron.get_rng_state()[8:].view(torch.int64).item() == 8, "6 values advance the offset by 8"
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.rand(6, device="neuron").cpu(), first)
    shifted = state.clone()
    shifted[8:] = torch.tensor([4], dtype=torch.int64).view(torch.uint8)
    torch.neuron.set_rng_state(shifted)
    assert not torch.equal(torch.rand(6, device="neuron").cpu(), first), "another offset, other values"
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.neuron.set_rng_state(torch.get_rng_state())


def test_torch_load_onto_a_core(neuron: object, tmp_path) -> None:
    """``map_location="neuron:1"`` (the Trainer's optimizer resume) lands on the core instead of crashing."""
    path = tmp_path / "state.pt"
    torch.save({"state": {0: {"exp_avg": torch.arange(3.0)}}, "steps": [torch.ones(2)]}, path)
    loaded = torch.load(path, map_location="neuron:1", weights_only=True)
    assert loaded["state"][0]["exp_avg"].device == torch.device("neuron", 1)
    assert loaded["steps"][0].device == torch.device("neuron", 1)
    assert loaded["state"][0]["exp_avg"].cpu().tolist() == [0.0, 1.0, 2.0]
    assert torch.load(path, map_location="cpu", weights_only=True)["steps"][0].device.type == "cpu"


def test_inference_mode_keeps_device_semantics(neuron: object) -> None:
    """Under ``torch.inference_mode()`` (common in inference scripts) ``Tensor.to(device)`` is
    dispatched with its device positional, and views of normal tensors stay normal tensors: both
    must behave as on CPU, so a model's normal buffers mix with inference-mode activations."""
    weight = torch.arange(3.0, device="neuron")  # made before inference mode: a normal tensor
    with torch.inference_mode():
        positions = torch.arange(4, device="neuron")[None]
        same = weight.to(device=weight.device, dtype=torch.float)
        expanded = weight[None, :, None].float().expand(1, -1, 1).to(positions.device)
        product = positions[..., None].float() * same
        to_host = product.to("cpu")
    assert same.device == expanded.device == product.device == torch.device("neuron", 0)
    assert not expanded.is_inference() and to_host.device.type == "cpu"
    assert torch.equal(to_host, torch.arange(4.0)[None, :, None] * torch.arange(3.0))


def test_generate_under_inference_mode_matches_no_grad(neuron: object, tmp_path) -> None:
    """transformers' generate inside ``torch.inference_mode()`` on the device gives the tokens it
    gives under ``torch.no_grad()`` (a Llama: its rotary buffer is expanded and moved each step)."""
    from transformers import AutoModelForCausalLM

    from neuroncompat.testing import build_causal_lm

    model = AutoModelForCausalLM.from_pretrained(build_causal_lm(tmp_path / "model", arch="llama")).to("neuron")
    ids = torch.tensor([[1, 5, 7, 9]], device="neuron")
    outputs = []
    for mode in (torch.no_grad, torch.inference_mode):
        with mode():
            outputs.append(
                model.generate(
                    input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False
                ).cpu()
            )
    assert outputs[0].shape == (1, 8) and torch.equal(outputs[0], outputs[1])
