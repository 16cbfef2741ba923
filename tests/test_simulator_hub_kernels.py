"""Hub kernels on the simulated device: a Neuron layer mapping replaces layers, their own forward runs.

With the real kernels package: ``kernelize`` with a ``"neuron"`` mapping (kernels' ``LayerRepository``,
a local repo, and transformers' ``KernelConfig``) loads the Neuron build of a repo built here, whose
layer calls an ``@nki.jit`` kernel; on the simulator each replaced layer keeps the kernel's name and
runs its own forward, the replacement is logged and recorded, and ``neuroncompat simulate``'s report
lists it. The ``nki`` stub imports like the real package and refuses to run a kernel.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

kernels = pytest.importorskip("kernels")

from neuroncompat.simulate import report  # noqa: E402
from neuroncompat.simulate.record import Recorder  # noqa: E402
from neuroncompat.simulator import hub_kernels  # noqa: E402
from neuroncompat.testing import build_kernel_repo, cache_kernel  # noqa: E402
from tests.test_patch_kernels import NEURON_BUILD  # noqa: E402

MAPPING_NAME = "RMSNorm"


@kernels.use_kernel_forward_from_hub(MAPPING_NAME)
class RMSNorm(torch.nn.Module):
    """A user's layer, registered for Hub kernels as transformers registers its norms."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, size))
        self.variance_epsilon = 1e-6

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * hidden_states * torch.rsqrt(variance + self.variance_epsilon)


@pytest.fixture(scope="module")
def neuron_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kernel_repo(
        tmp_path_factory.mktemp("rmsnorm-neuron"), "rmsnorm-neuron", {"torch-neuron": NEURON_BUILD}
    )


@pytest.fixture
def hub(neuron_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    from huggingface_hub import constants

    cache_kernel(tmp_path, "acme/rmsnorm-neuron", neuron_repo)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    hub_kernels.reset()
    yield tmp_path
    hub_kernels.reset()


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), RMSNorm(8), torch.nn.Linear(8, 8), RMSNorm(8)).to("neuron")


def test_the_nki_stub_imports_and_refuses_to_run(neuron: object) -> None:
    import nki
    import nki.language as nl

    @nki.jit
    def add(a: nl.ndarray, b: nl.ndarray) -> nl.ndarray:
        return a

    @nki.jit(mode="torchxla")
    def scaled(a: object) -> object:
        return a

    assert add.__name__ == "add" and nl.float32 is not None
    for kernel in (add, add[2], scaled):
        with pytest.raises(nki.NkiNotSimulated, match="cannot run on the simulated Neuron device"):
            kernel(torch.ones(2, device="neuron"), torch.ones(2, device="neuron"))


def test_the_nki_stub_goes_with_the_device(neuron: object) -> None:
    from neuroncompat import simulator

    assert getattr(sys.modules["nki"], "__simulated__", False)
    simulator.disable()
    try:
        assert "nki" not in sys.modules and "nki.language" not in sys.modules
    finally:
        simulator.enable(cores=2)


def test_a_neuron_layer_mapping_replaces_the_layers_and_their_forward_runs(
    neuron: object, hub: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = _model()
    x = torch.randn(3, 8, device="neuron")
    expected = model(x)
    mapping = {
        MAPPING_NAME: {
            "cuda": kernels.LayerRepository(repo_id="kernels-community/rmsnorm", layer_name="RMSNorm", version=1),
            "neuron": kernels.LayerRepository(repo_id="acme/rmsnorm-neuron", layer_name="NeuronRMSNorm", version=1),
        }
    }
    with caplog.at_level(logging.INFO, logger="neuroncompat.simulator"), kernels.use_kernel_mapping(mapping):
        kernels.kernelize(model, mode=kernels.Mode.INFERENCE)
    for norm in (model[1], model[3]):
        assert norm.forward.__qualname__ == "NeuronRMSNorm.forward"  # replaced, as on a trn2
    torch.testing.assert_close(model(x), expected, rtol=0, atol=0)  # the layer's own forward ran
    found = hub_kernels.KernelReplacement("RMSNorm", "RMSNorm", "NeuronRMSNorm", "acme/rmsnorm-neuron")
    assert hub_kernels.replacements() == [(found, 2)]
    assert caplog.text.count("kernelize: RMSNorm (RMSNorm) -> NeuronRMSNorm from acme/rmsnorm-neuron") == 1


def test_layers_without_a_neuron_mapping_are_left_alone(neuron: object, hub: Path) -> None:
    model = _model()
    mapping = {
        MAPPING_NAME: {
            "cuda": kernels.LayerRepository(repo_id="kernels-community/rmsnorm", layer_name="RMSNorm", version=1)
        }
    }
    with kernels.use_kernel_mapping(mapping):
        kernels.kernelize(model, mode=kernels.Mode.INFERENCE)
    assert model[1].forward.__func__ is RMSNorm.forward
    assert hub_kernels.replacements() == []


def test_kernel_config_with_a_local_neuron_repo_on_a_transformers_model(
    neuron: object, hub: Path, tmp_path: Path, tiny_qwen: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers registers its norms for Hub kernels only with a kernels it accepts (0.18.x, not on
    PyPI here), so the test registers Qwen3's the way it would; the mapping is transformers' own
    ``KernelConfig``, turned into kernels' by ``create_compatible_mapping`` on the neuron device."""
    from transformers import AutoModelForCausalLM, KernelConfig
    from transformers.models.qwen3 import modeling_qwen3

    # its own name: kernels imports a build as the module its metadata id names
    neuron_repo = build_kernel_repo(tmp_path / "local", "rmsnorm-neuron-local", {"torch-neuron": NEURON_BUILD})
    monkeypatch.setattr(modeling_qwen3.Qwen3RMSNorm, "kernel_layer_name", "RMSNorm", raising=False)
    monkeypatch.setattr(modeling_qwen3.Qwen3RMSNorm, "kernel_condition", staticmethod(lambda m: True), raising=False)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron")
    ids = torch.tensor([[1, 5, 9, 2]], device="neuron")
    expected = model(ids).logits
    config = KernelConfig({"RMSNorm": {"neuron": f"{neuron_repo}:NeuronRMSNorm"}}, use_local_kernel=True)
    config.sanitize_kernel_mapping(model)
    config.create_compatible_mapping(model)
    with kernels.use_kernel_mapping(config.kernel_mapping, inherit_mapping=False):
        kernels.kernelize(model, mode=kernels.Mode.INFERENCE)
    norms = [m for m in model.modules() if isinstance(m, modeling_qwen3.Qwen3RMSNorm)]
    assert norms and all(m.forward.__qualname__ == "NeuronRMSNorm.forward" for m in norms)
    torch.testing.assert_close(model(ids).logits, expected, rtol=0, atol=0)
    ((found, count),) = hub_kernels.replacements()
    assert (found.layer, found.module, found.kernel, count) == ("RMSNorm", "Qwen3RMSNorm", "NeuronRMSNorm", len(norms))
    assert found.repo == str(neuron_repo)


def test_the_simulate_report_lists_the_replacements(neuron: object, hub: Path) -> None:
    recorder = Recorder()
    recorder.start()
    try:
        model = _model()
        mapping = {
            MAPPING_NAME: {
                "neuron": kernels.LayerRepository(repo_id="acme/rmsnorm-neuron", layer_name="NeuronRMSNorm", version=1)
            }
        }
        with kernels.use_kernel_mapping(mapping):
            kernels.kernelize(model, mode=kernels.Mode.INFERENCE)
        model(torch.ones(2, 8, device="neuron"))
    finally:
        recorder.stop()
    built = report.build([recorder.snapshot()], ["python", "kernels.py"], 0)
    (rank,) = built["ranks"]
    assert rank["hub_kernels"] == [
        {"layer": "RMSNorm", "module": "RMSNorm", "kernel": "NeuronRMSNorm", "repo": "acme/rmsnorm-neuron", "layers": 2}
    ]
    assert "    RMSNorm: 2 RMSNorm layer(s) -> NeuronRMSNorm from acme/rmsnorm-neuron" in report.render_text(built)
