"""NEURONCOMPAT_CUDA=redirect in one process: user code's CUDA calls run on the (simulated)
NeuronCore, library code keeps the real answers, and each redirected site is logged.

End-to-end runs of unmodified CUDA scripts are in ``tests/test_cuda_redirect_scripts.py``; this file is
run in a fresh interpreter by ``tests/test_cuda_redirect.py`` (see why there).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from launch import simulated_env

HERE = Path(__file__).resolve()


@pytest.fixture
def redirected(neuron: object) -> Iterator[object]:
    """The redirect on the simulated device (2 cores), off again after the test."""
    from neuroncompat import cuda
    from neuroncompat.cuda import sites

    sites.clear()
    cuda.redirect()
    try:
        yield cuda
    finally:
        cuda.undo()
        sites.clear()
        torch._dynamo.reset()  # compiled code and guards that saw the wrapped entry points


def _library_function(source: str, name: str) -> object:
    """A function whose code claims to live in torch's own package: library code to the redirect."""
    namespace: dict[str, object] = {"torch": torch}
    exec(compile(source, torch.__file__, "exec"), namespace)
    return namespace[name]


def _logged(call_prefix: str) -> list[object]:
    from neuroncompat.cuda import sites

    return [s for s in sites.entries() if s.call.startswith(call_prefix)]


# -- who is redirected ------------------------------------------------------------------------
def test_caller_rule_separates_user_code_from_libraries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json as stdlib_json

    import accelerate
    import click
    import transformers

    from neuroncompat.cuda import callers

    callers.reset()
    library = [
        torch.__file__,
        transformers.__file__,
        accelerate.__file__,
        stdlib_json.__file__,
        click.__file__,
        "<frozen importlib._bootstrap>",
        "<eval_with_key>.3",
    ]
    user = [str(HERE), str(tmp_path / "train.py"), "<stdin>", "<string>", "<ipython-input-3-1a2b>"]
    assert [callers.is_user_file(f) for f in library] == [False] * len(library)
    assert [callers.is_user_file(f) for f in user] == [True] * len(user)

    # A vendored package in site-packages can be redirected on request; torch never can.
    monkeypatch.setenv(
        callers.USER_PATHS_ENV, os.pathsep.join([os.path.dirname(click.__file__), os.path.dirname(torch.__file__)])
    )
    callers.reset()
    try:
        assert callers.is_user_file(click.__file__)
        assert not callers.is_user_file(torch.__file__)
    finally:
        monkeypatch.delenv(callers.USER_PATHS_ENV)
        callers.reset()


def test_user_code_sees_a_device_while_libraries_take_their_neuron_paths(redirected: object, tmp_path: Path) -> None:
    from accelerate import PartialState
    from transformers import TrainingArguments
    from transformers.utils import is_torch_cuda_available

    assert torch.cuda.is_available() and torch.cuda.device_count() == 2
    assert TrainingArguments(output_dir=str(tmp_path)).device == torch.device("neuron", 0)
    assert PartialState().device.type == "neuron"
    assert not is_torch_cuda_available()
    probe = _library_function(
        "def probe():\n    return torch.cuda.is_available(), torch.cuda.device_count()\n", "probe"
    )
    assert probe() == (False, 0)


# -- placement ----------------------------------------------------------------------------------
def test_cuda_device_arguments_place_tensors_on_neuron(redirected: object, tiny_llama: Path) -> None:
    from transformers import AutoTokenizer

    assert torch.zeros(2, device="cuda").device == torch.device("neuron", 0)
    assert torch.ones(2).to("cuda:1").device == torch.device("neuron", 1)
    assert torch.ones(2).to(device=torch.device("cuda", 1)).device == torch.device("neuron", 1)
    assert torch.ones(2).cuda().device.type == "neuron"
    assert torch.ones(2).new_zeros(3, device="cuda").device.type == "neuron"
    model = torch.nn.Linear(2, 2).cuda(1)
    assert model.weight.device == torch.device("neuron", 1)
    assert torch.nn.Linear(2, 2).to("cuda").weight.device.type == "neuron"
    # "cuda" handed to a library (BatchEncoding.to) still lands on the NeuronCore.
    batch = AutoTokenizer.from_pretrained(tiny_llama)(["the neuron core"], return_tensors="pt").to("cuda")
    assert batch["input_ids"].device.type == "neuron"
    buffer = io.BytesIO()
    torch.save({"w": torch.arange(3.0)}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, map_location="cuda")
    assert loaded["w"].device.type == "neuron" and loaded["w"].cpu().tolist() == [0.0, 1.0, 2.0]
    # Non-CUDA arguments are untouched.
    assert torch.ones(2).to("cpu").device.type == "cpu" and torch.zeros(1, device="neuron").device.type == "neuron"
    assert torch.zeros(1, device="cuda").device == torch.device("neuron", 0)

    rules = {(s.call, s.rule) for s in redirected.sites.entries()}
    assert ("torch.zeros(device='cuda')", "NM102") in rules
    assert ("Module.cuda(1)", "NM101") in rules
    assert ("torch.load(map_location='cuda')", "NM102") in rules
    assert all(s.file.endswith("redirect_cases.py") for s in redirected.sites.entries())


def test_from_pretrained_device_map_cuda_loads_on_neuron(redirected: object, tiny_llama: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_llama, device_map={"": "cuda:1"})
    assert {p.device for p in model.parameters()} == {torch.device("neuron", 1)}
    assert _logged("from_pretrained")[0].rule == "NM105"


# -- torch.cuda API -----------------------------------------------------------------------------
def test_torch_cuda_api_maps_to_torch_neuron(redirected: object) -> None:
    torch.cuda.set_device(1)
    try:
        assert torch.cuda.current_device() == 1 == torch.neuron.current_device()
        x = torch.ones(1024, device="cuda")
        assert x.device == torch.device("neuron", 1)
        assert torch.cuda.memory_allocated(1) >= 4096 and torch.cuda.max_memory_allocated() >= 4096
        assert "neuron:1" in torch.cuda.memory_summary()
        free, total = torch.cuda.mem_get_info()
        assert 0 < free <= total
    finally:
        torch.cuda.set_device(0)
    torch.cuda.manual_seed(0)
    first = torch.randn(3, device="cuda").cpu()
    torch.cuda.manual_seed(0)
    assert torch.equal(first, torch.randn(3, device="cuda").cpu())
    assert "simulated" in torch.cuda.get_device_name(0)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    end.record()
    assert start.elapsed_time(end) >= 0
    assert torch.cuda.Stream().device.type == "neuron"
    with torch.cuda.device(1):
        assert torch.zeros(1, device="cuda").device == torch.device("neuron", 1)


COMMON_CUDA_MEMORY_KEYS = (
    "active_bytes.all.peak",  # llama-cookbook's MemoryTrace
    "active_bytes.all.current",
    "allocated_bytes.all.current",
    "allocated_bytes.all.peak",
    "reserved_bytes.all.current",
    "reserved_bytes.all.peak",
    "requested_bytes.all.peak",
    "segment.all.current",
    "num_alloc_retries",
    "num_ooms",
)


def test_memory_stats_has_cudas_keys_and_names_a_missing_one(redirected: object) -> None:
    x = torch.ones(1024, device="cuda")
    stats = torch.cuda.memory_stats()
    assert [key for key in COMMON_CUDA_MEMORY_KEYS if key not in stats] == []
    assert stats["active_bytes.all.peak"] >= 4096 and stats["num_alloc_retries"] == 0 == stats["num_ooms"]
    assert stats["allocated_bytes.all.current"] == torch.cuda.memory_allocated()
    assert list(stats) == sorted(stats), "sorted by key, as CUDA's"
    with pytest.raises(KeyError, match=r"\['allocated_byte\.all\.peak'\].*not a CUDA memory statistic"):
        _ = stats["allocated_byte.all.peak"]
    with pytest.raises(KeyError, match=r"\['num_oom_rejections'\].*does not report.*\.get\('num_oom_rejections', 0\)"):
        _ = stats["num_oom_rejections"]  # a CUDA counter the simulated allocator does not keep
    assert stats.get("num_oom_rejections", 0) == 0
    del x


def test_memory_stats_fills_cuda_keys_a_torchneuron_may_not_report(
    redirected: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under every reading of what TorchNeuron's own memory_stats() returns (few keys; an allocator
    torch.accelerator cannot read), the keys the runtime's counters answer are there, the rest named."""
    x = torch.ones(1024, device="cuda")
    monkeypatch.setattr(torch.neuron, "memory_stats", lambda device=None: {"allocated_bytes.all.current": 4096})
    stats = torch.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == 4096, "torch.neuron's own figure wins"
    assert stats["active_bytes.all.peak"] == torch.accelerator.memory_stats()["active_bytes.all.peak"]

    def not_a_device_allocator(device: object = None) -> dict[str, int]:
        raise RuntimeError("Allocator for neuron is not a DeviceAllocator.")

    monkeypatch.setattr(torch.accelerator, "memory_stats", not_a_device_allocator)
    stats = torch.cuda.memory_stats(0)
    assert stats["allocated_bytes.all.peak"] == torch.neuron.max_memory_allocated(0)
    assert stats["reserved_bytes.all.current"] == torch.neuron.memory_reserved(0)
    with pytest.raises(KeyError, match=r"\['active_bytes\.all\.peak'\].*does not report"):
        _ = stats["active_bytes.all.peak"]
    del x


def test_no_fake_compute_capability(redirected: object) -> None:
    assert torch.cuda.get_device_capability() == (0, 0)
    props = torch.cuda.get_device_properties(0)
    assert (props.major, props.minor) == (0, 0) and props.total_memory > 0
    with pytest.raises(AttributeError, match=r"multi_processor_count.*torch.version.cuda"):
        _ = props.multi_processor_count
    assert _logged("torch.cuda.get_device_capability")[0].rule == "NM904"


def test_call_without_neuron_equivalent_fails_naming_call_line_and_fix(redirected: object) -> None:
    from neuroncompat.cuda.api import CudaRedirectError

    with pytest.raises(CudaRedirectError) as raised:
        torch.cuda.set_per_process_memory_fraction(0.5)
    message = str(raised.value)
    assert "torch.cuda.set_per_process_memory_fraction()" in message and "redirect_cases.py:" in message
    assert "Fix:" in message


def test_library_isinstance_checks_on_cuda_classes_still_work(redirected: object) -> None:
    probe = _library_function("def probe(s):\n    return isinstance(s, torch.cuda.Stream)\n", "probe")
    assert probe(object()) is False


# -- tensor queries, generators, legacy types, backend flags -------------------------------------
def test_is_cuda_is_true_for_user_code_only(redirected: object) -> None:
    x = torch.ones(2, device="cuda")
    assert x.is_cuda and not torch.ones(2).is_cuda
    probe = _library_function("def probe(x):\n    return x.is_cuda\n", "probe")
    assert probe(x) is False  # libraries pick CUDA kernels and streams on is_cuda
    [site] = _logged("Tensor.is_cuda")
    assert site.rule is None and site.calls == 1


def test_cuda_generator_is_a_cpu_generator_and_still_a_generator(redirected: object) -> None:
    from torch.utils.data import DataLoader

    generator = torch.Generator(device="cuda").manual_seed(0)
    assert generator.device.type == "cpu"
    assert isinstance(generator, torch.Generator) and isinstance(torch.default_generator, torch.Generator)
    assert torch.Generator("cpu").device.type == "cpu"
    first = torch.randn(3, generator=generator, device="cuda")
    assert first.device.type == "neuron"
    assert torch.equal(first.cpu(), torch.randn(3, generator=torch.Generator().manual_seed(0)))
    order = [int(b) for b in DataLoader(range(6), shuffle=True, generator=torch.Generator(device="cuda"))]
    assert sorted(order) == list(range(6))
    assert {s.rule for s in _logged("torch.Generator")} == {"NM102"}


def test_legacy_cuda_tensor_types_build_on_neuron(redirected: object) -> None:
    import numpy as np

    Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor  # noqa: N806 (the scripts' name)
    valid = Tensor(3, 1).fill_(1.0)
    assert valid.device.type == "neuron" and valid.dtype == torch.float32 and valid.sum().item() == 3.0
    z = Tensor(np.ones((2, 4)))
    assert z.device.type == "neuron" and z.shape == (2, 4)
    labels = torch.cuda.LongTensor([1, 2])
    assert labels.device.type == "neuron" and labels.dtype == torch.int64
    assert isinstance(z, torch.cuda.FloatTensor) and not isinstance(z, torch.cuda.LongTensor)
    assert not isinstance(torch.ones(2), torch.cuda.FloatTensor)
    moved = torch.ones(2, dtype=torch.int64).type(Tensor)
    assert moved.device.type == "neuron" and moved.dtype == torch.float32
    assert torch.ones(2).type("torch.cuda.LongTensor").dtype == torch.int64
    assert torch.ones(2).type(torch.LongTensor).device.type == "cpu" and torch.ones(2).type() == "torch.FloatTensor"
    probe = _library_function("def probe(x):\n    return isinstance(x, torch.cuda.FloatTensor)\n", "probe")
    assert probe(z) is False
    built = [s for s in _logged("torch.cuda.") if s.call.endswith("Tensor(...)")]
    assert {s.call for s in built} == {"torch.cuda.FloatTensor(...)", "torch.cuda.LongTensor(...)"}
    cast = _logged("Tensor.type(torch.cuda.")
    assert cast and {s.rule for s in built + cast} == {"NM108"}  # the rule that rewrites them for good


def test_pin_memory_cuda_pins_for_the_neuron_core(redirected: object) -> None:
    from torch.utils.data import DataLoader

    pinned = torch.arange(3.0).pin_memory("cuda")
    assert pinned.device.type == "cpu" and pinned.tolist() == [0.0, 1.0, 2.0]
    assert _logged("Tensor.pin_memory")[0].became == "Tensor.pin_memory()"
    # torch ignores pin_memory_device (deprecated) and pins for the current accelerator
    with pytest.warns(UserWarning, match="pin_memory_device is deprecated"):
        batches = [b.tolist() for b in DataLoader(range(4), batch_size=2, pin_memory=True, pin_memory_device="cuda")]
    assert batches == [[0, 1], [2, 3]]


def test_backend_flags_from_user_code_are_logged_as_no_effect(redirected: object) -> None:
    before = torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        assert torch.backends.cudnn.benchmark and torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32 = before
    calls = {s.call: s for s in _logged("torch.backends.")}
    assert "torch.backends.cudnn.benchmark = True" in calls
    assert "torch.backends.cuda.matmul.allow_tf32 = True" in calls
    assert all(s.rule is None and "no effect on Neuron" in s.became for s in calls.values())


# -- AMP ------------------------------------------------------------------------------------------
def test_cuda_autocast_is_bf16_on_neuron_and_scaler_passes_through(redirected: object) -> None:
    layer = torch.nn.Linear(4, 4).to("cuda")
    x = torch.randn(2, 4, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        assert layer(x).dtype == torch.bfloat16
    with torch.cuda.amp.autocast():
        out = layer(x)
    assert out.dtype == torch.bfloat16
    for scaler in (torch.cuda.amp.GradScaler(), torch.amp.GradScaler("cuda")):
        loss = out.float().sum()
        assert not scaler.is_enabled() and scaler.scale(loss) is loss
    assert {s.rule for s in _logged("torch.")} >= {"NM204", "NM205"}
    # Library code naming "cuda" keeps torch's own behaviour (autocast disabled off CUDA).
    probe = _library_function("def probe():\n    return torch.autocast('cuda').device\n", "probe")
    with pytest.warns(UserWarning, match="CUDA is not available"):
        assert probe() == "cuda"


# -- distributed ----------------------------------------------------------------------------------
def test_nccl_process_group_and_ddp_keeps_device_ids(redirected: object) -> None:
    """DDP keeps ``device_ids`` (as neuron-migrate does): given them, it moves each CPU batch to the
    rank's NeuronCore; ids naming CUDA are translated to the same core, in the same form."""
    import torch.distributed as dist
    from launch import free_port
    from torch.nn.parallel import DistributedDataParallel

    assert dist.is_nccl_available()
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        assert dist.get_backend() == "neuron"
        for ids, output in (([0], 0), ([torch.device("cuda", 0)], "cuda:0"), (["cuda"], torch.device("cuda"))):
            model = DistributedDataParallel(torch.nn.Linear(4, 4).cuda(0), device_ids=ids, output_device=output)
            assert (model.device_ids, model.output_device) == ([0], 0)
            out = model(torch.randn(2, 4))  # a CPU batch: DDP moves it to neuron:0
            assert out.device == torch.device("neuron", 0)
            out.sum().backward()
            assert model.module.weight.grad.device.type == "neuron"
    finally:
        dist.destroy_process_group()
    assert {s.rule for s in _logged("init_process_group")} == {"NM401"}
    ddp = {s.call: s.rule for s in _logged("DistributedDataParallel")}
    assert ddp == {
        "DistributedDataParallel(device_ids=torch.device('cuda:0'))": "NM102",
        "DistributedDataParallel(output_device='cuda:0')": "NM102",
        "DistributedDataParallel(device_ids='cuda')": "NM102",
        "DistributedDataParallel(output_device=torch.device('cuda'))": "NM102",
    }


def test_every_logged_rule_is_a_live_neuron_migrate_rule(redirected: object, tmp_path: Path) -> None:
    """The log's bridge (``neuron-migrate --select ...``) only names rules the codemod has."""
    from migrate.rule_families import get_rule
    from neuroncompat.cuda import sites

    torch.cuda.set_device(0)
    layer = torch.nn.Linear(2, 2).cuda()
    with torch.cuda.amp.autocast():
        layer(torch.ones(1, 2).to("cuda"))
    torch.cuda.amp.GradScaler()
    torch.cuda.get_device_capability()
    torch.cuda.is_tf32_supported()
    torch.cuda.Stream()
    assert len(sites.entries()) >= 8
    dead = {s.rule for s in sites.entries() if s.rule is not None and get_rule(s.rule) is None}
    assert not dead, f"the redirect logs retired neuron-migrate rules: {sorted(dead)}"


# -- the log --------------------------------------------------------------------------------------
def test_log_names_each_site_once_with_its_rule(redirected: object, tmp_path: Path) -> None:
    from neuroncompat.cuda import sites

    for _ in range(3):
        torch.ones(1).to("cuda")
    line = sys._getframe().f_lineno - 1
    path = sites.write(tmp_path)
    data = json.loads(path.read_text())
    assert data["schema"] == "neuroncompat.cuda_redirect/1"
    [entry] = [s for s in data["sites"] if s["line"] == line]
    assert entry["call"] == "Tensor.to('cuda')" and entry["became"] == "Tensor.to('neuron:0')"
    assert entry["rule"] == "NM102" and entry["calls"] == 3 and entry["file"].endswith("redirect_cases.py")
    summary = sites.summary(sites.entries(), path)
    assert f"redirect_cases.py:{line}" in summary
    assert "neuron-migrate --select NM102 --write" in summary


# -- off by default, refusal ---------------------------------------------------------------------
@pytest.mark.slow
def test_off_by_default_nothing_changes() -> None:
    code = (
        "import sys, neuroncompat, torch\n"
        "print(torch.cuda.is_available(), torch.cuda.is_available.__module__, 'neuroncompat.cuda' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=simulated_env(), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "torch.cuda", "False"]


@pytest.mark.slow
def test_refuses_without_neuron_or_simulator() -> None:
    env = simulated_env(NEURONCOMPAT_SIMULATE="0", NEURONCOMPAT_CUDA="redirect")
    result = subprocess.run(
        [sys.executable, "-c", "import neuroncompat\nimport torch\nprint('ran')"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0 and "ran" not in result.stdout
    assert "RedirectUnavailable: NEURONCOMPAT_CUDA=redirect needs a Neuron device" in result.stderr
    assert "neuroncompat simulate --cuda-redirect" in result.stderr


def test_redirect_call_refuses_without_neuron() -> None:
    from neuroncompat import cuda

    with pytest.raises(cuda.RedirectUnavailable, match="needs a Neuron device"):
        cuda.redirect()
    assert not cuda.is_redirected()


def test_torch_compile_traces_through_the_wrapped_entry_points(redirected: object) -> None:
    """Library code compiled for Neuron (factories, autocast on the tensor's device) stays one graph."""
    from neuroncompat import simulator

    def forward(x: torch.Tensor) -> torch.Tensor:
        y = x + torch.arange(4, device=x.device) + torch.zeros(4, device=x.device)
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            return (y @ y.T.to(x.dtype)).float()

    compiled = torch.compile(forward, backend="neuron", fullgraph=True)
    x = torch.ones(4, 4, device="cuda")
    assert torch.allclose(compiled(x).cpu(), forward(x).cpu())
    assert len(simulator.compiles()) == 1


def test_meta_device_construction_still_sees_the_factories(redirected: object, tiny_llama: Path) -> None:
    """transformers builds models under ``torch.device("meta")``; non-persistent buffers (RoPE) must
    come out initialised, as without the redirect."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        assert torch.arange(3).device.type == "meta"
    model = AutoModelForCausalLM.from_pretrained(tiny_llama).to("cuda")
    expected = AutoModelForCausalLM.from_pretrained(tiny_llama).model.rotary_emb.inv_freq
    assert torch.equal(model.model.rotary_emb.inv_freq.cpu(), expected)


def test_simulate_report_section_merges_the_ranks_logs(tmp_path: Path) -> None:
    from neuroncompat.simulate import redirect_log

    def site(line: int, call: str, rule: str | None, calls: int) -> dict:
        return {"file": "train.py", "line": line, "call": call, "became": "x", "rule": rule, "calls": calls}

    for rank, sites in (
        (0, [site(3, "torch.cuda.set_device()", "NM104", 1), site(9, "Tensor.cuda()", "NM101", 4)]),
        (1, [site(3, "torch.cuda.set_device()", "NM104", 1)]),
    ):
        log = {"schema": "neuroncompat.cuda_redirect/1", "rank": rank, "pid": 100 + rank, "argv": [], "sites": sites}
        (tmp_path / f"rank{rank}-{100 + rank}.json").write_text(json.dumps(log))
    section = redirect_log.section(redirect_log.load(tmp_path))
    assert [(s["line"], s["ranks"], s["calls"]) for s in section["sites"]] == [(3, [0, 1], 2), (9, [0], 4)]
    assert section["migrate_command"] == "neuron-migrate --select NM101,NM104 --write train.py"
    text = redirect_log.render_text(section)
    assert "train.py:3  torch.cuda.set_device() -> x  [NM104]  (rank 0,1, 2 call(s))" in text
