"""``kernels``: Hub kernels on Neuron, with the real kernels and transformers packages, offline.

Each failure mode of docs/gaps.md#kernels is reproduced first without the patch, then shown turned
into the documented behaviour. The kernel repos are built here (``neuroncompat.testing``) and filed
in a temporary hub cache: ``kernels-community/activation`` with only a CUDA build,
``kernels-community/activation-triton`` with a CUDA build and a legacy ``torch-universal`` one, and
``acme/rmsnorm-neuron``, a Neuron build (pure Python with an ``@nki.jit`` kernel, as Neuron builds are).
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType

import pytest
import torch

kernels = pytest.importorskip("kernels")

from neuroncompat.patches.kernels import UNIVERSAL_ENV, NeuronKernelMissing  # noqa: E402
from neuroncompat.testing import build_kernel_repo, cache_kernel  # noqa: E402

CUDA_BUILD = "torch29-cxx11-cu128-x86_64-linux"
NEURON_LAYERS = """
import nki
import nki.language as nl
import torch


@nki.jit
def rms_norm_kernel(hidden_states, weight, eps):
    out = nl.ndarray(hidden_states.shape, dtype=hidden_states.dtype, buffer=nl.shared_hbm)
    return out


class NeuronRMSNorm(torch.nn.Module):
    def forward(self, hidden_states):
        return rms_norm_kernel(hidden_states, self.weight, self.variance_epsilon)
"""
NEURON_BUILD = {"__init__.py": "from . import layers\n", "layers.py": NEURON_LAYERS}
CUDA_ONLY = {CUDA_BUILD: {"__init__.py": "raise ImportError('a CUDA extension')\n"}}
TRITON = {
    **CUDA_ONLY,
    "torch-universal": {"__init__.py": "def silu_and_mul(out, x):\n    raise RuntimeError('a Triton kernel')\n"},
}


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("hf")
    repos = tmp_path_factory.mktemp("repos")
    for repo_id, name, builds in (
        ("kernels-community/activation", "activation", CUDA_ONLY),
        ("kernels-community/activation-triton", "activation-triton", TRITON),
        ("kernels-community/layer_norm", "layer-norm", CUDA_ONLY),
        ("acme/rmsnorm-neuron", "rmsnorm-neuron", {"torch-neuron": NEURON_BUILD}),
    ):
        cache_kernel(home, repo_id, build_kernel_repo(repos / name, name, builds))
    return home


@pytest.fixture
def hub(hf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary hub cache in effect (huggingface_hub and kernels read it at each call)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.delenv(UNIVERSAL_ENV, raising=False)
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    return hf_home


def _level_of(text: str, caplog: pytest.LogCaptureFixture) -> int:
    """The level of the one ``kernels`` patch record containing ``text``."""
    (record,) = [r for r in caplog.records if "[kernels]" in r.getMessage() and text in r.getMessage()]
    return record.levelno


def _neuron_config() -> object:
    from transformers import KernelConfig

    return KernelConfig({"RMSNorm": {"neuron": "acme/rmsnorm-neuron:NeuronRMSNorm"}})


def test_gaps_without_the_patch(shim: ModuleType, hub: Path, tiny_qwen: Path) -> None:
    from transformers import AutoModelForCausalLM

    with pytest.raises(ValueError, match=r"Kernels are not available.*0\.18\.2 <= version < 0\.19\.0"):
        AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", use_kernels=True)
    with pytest.raises(FileNotFoundError, match="Cannot find a build variant") as missing:
        kernels.get_kernel("kernels-community/activation", version=1)
    assert "neuron" not in str(missing.value).lower()
    triton = kernels.get_kernel("kernels-community/activation-triton", version=1)
    assert Path(triton.__file__).parent.name == "torch-universal"  # selected on Neuron, fails when called
    with pytest.raises(RuntimeError, match="a Triton kernel"):
        triton.silu_and_mul(torch.empty(2, device="neuron"), torch.ones(4, device="neuron"))


def test_use_kernels_without_a_neuron_mapping_is_dropped(
    shim: ModuleType, hub: Path, tiny_qwen: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers import AutoModelForCausalLM

    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", use_kernels=True)
    assert not model.use_kernels
    assert model(torch.ones(1, 4, dtype=torch.long, device="neuron")).logits.device.type == "neuron"
    assert (
        "[kernels] use_kernels dropped: no Neuron kernels are mapped (transformers' default kernel mapping has "
        'no "neuron" entry); the original layers are kept' in caplog.text
    )
    assert _level_of("use_kernels dropped", caplog) == logging.WARNING  # an explicit user value changed


def test_kernel_config_naming_cuda_repos_is_dropped(
    shim: ModuleType, hub: Path, tiny_qwen: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers import AutoModelForCausalLM, KernelConfig

    shim.apply()
    config = KernelConfig(
        {
            "RMSNorm": "kernels-community/layer_norm:LlamaRMSNorm",  # mapped to the model's device by transformers
            "SiLUAndMul": {"cuda": "kernels-community/activation:SiluAndMul"},
        }
    )
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", kernel_config=config)
    assert not model.use_kernels
    assert (
        "[kernels] use_kernels dropped: no Neuron kernels are mapped (kernel_config maps no layer to a Neuron build: "
        "RMSNorm: kernels-community/layer_norm has no torch-neuron build; SiLUAndMul: cuda only); the original "
        "layers are kept" in caplog.text
    )
    assert _level_of("use_kernels dropped", caplog) == logging.WARNING


@pytest.mark.parametrize("entry", ["neuron key", "repo with a Neuron build"])
def test_neuron_mapping_with_a_kernels_transformers_rejects_warns_with_the_range(
    shim: ModuleType, hub: Path, tiny_qwen: Path, caplog: pytest.LogCaptureFixture, entry: str
) -> None:
    from transformers import AutoModelForCausalLM, KernelConfig

    shim.apply()
    repo = "acme/rmsnorm-neuron:NeuronRMSNorm"
    config = _neuron_config() if entry == "neuron key" else KernelConfig({"RMSNorm": repo})
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        model = AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", kernel_config=config)
    assert not model.use_kernels
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING and "[kernels]" in r.getMessage()]
    assert warning.getMessage() == (
        f"[kernels] kernel_config maps Neuron kernels (RMSNorm -> {repo}), but transformers 5.23.0 loads kernels "
        f"only with kernels>=0.18.2,<0.19.0 (installed: {kernels.__version__}): the original layers are kept; "
        "pip install 'kernels>=0.18.2,<0.19.0' to use them"
    )


def test_neuron_mapping_with_an_accepted_kernels_is_left_to_transformers(
    shim: ModuleType, hub: Path, tiny_qwen: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The patch reads transformers' own version check; with it passing, the kwargs reach transformers
    untouched, and transformers' own code (which imported the check by name, still false here) then raises
    on the kernels 0.17.2 installed here, as it would without the shim."""
    from transformers import AutoModelForCausalLM, KernelConfig
    from transformers.utils import import_utils

    shim.apply()
    monkeypatch.setattr(import_utils, "is_kernels_available", lambda: True)
    config = KernelConfig(
        {"RMSNorm": {"neuron": "acme/rmsnorm-neuron:NeuronRMSNorm"}, "SiLUAndMul": "kernels-community/activation:X"}
    )
    with caplog.at_level(logging.INFO, logger="neuroncompat"), pytest.raises(RuntimeError, match="requires `kernels`"):
        AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", kernel_config=config)
    assert (
        "[kernels] kernel_config: these layers keep their original forward on Neuron: SiLUAndMul: "
        "kernels-community/activation has no torch-neuron build" in caplog.text
    )
    assert _level_of("keep their original forward", caplog) == logging.WARNING  # transformers says nothing
    assert "use_kernels dropped" not in caplog.text


def test_get_kernel_without_a_neuron_build_fails_at_the_call(shim: ModuleType, hub: Path) -> None:
    shim.apply()
    with pytest.raises(NeuronKernelMissing) as missing:
        kernels.get_kernel("kernels-community/activation", version=1)
    assert isinstance(missing.value, FileNotFoundError)  # kernels' own error type: callers' handlers still work
    assert str(missing.value) == (
        'get_kernel("kernels-community/activation") on Neuron: the repo has no Neuron build. Neuron runs Hub '
        "kernels built as build/torch-neuron/ (pure Python and NKI, with the nki package installed). Use "
        "torch.nn.functional.silu / gelu (silu_and_mul: F.silu(x[..., :d]) * x[..., d:]) instead, or an NKI "
        "kernel (https://github.com/aws-neuron/nki-library) from a repo with a torch-neuron build."
    )
    from kernels import load

    assert load.get_kernel is kernels.get_kernel  # `from kernels.load import get_kernel` gets it too


def test_a_universal_build_is_refused_unless_opted_in(
    shim: ModuleType, hub: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"), pytest.raises(NeuronKernelMissing) as missing:
        kernels.get_kernel("kernels-community/activation-triton", version=1)
    assert (
        "its torch-universal build (legacy, usually Triton) is refused on Neuron, "
        f"{UNIVERSAL_ENV}=1 loads it anyway" in str(missing.value)
    )
    assert "DEFAULT_OP" not in str(missing.value) and "the PyTorch op this kernel implements" in str(missing.value)
    assert "[kernels] a legacy torch-universal build (usually Triton) refused on Neuron" in caplog.text
    monkeypatch.setenv(UNIVERSAL_ENV, "1")
    triton = kernels.get_kernel("kernels-community/activation-triton", version=1)
    assert Path(triton.__file__).parent.name == "torch-universal"


def test_a_neuron_build_loads_on_the_simulator(shim: ModuleType, hub: Path) -> None:
    shim.apply()
    assert kernels.has_kernel("acme/rmsnorm-neuron", version=1)
    kernel = kernels.get_kernel("acme/rmsnorm-neuron", version=1, trust_remote_code=True)
    assert Path(kernel.__file__).parent.name == "torch-neuron"
    assert kernel.layers.NeuronRMSNorm.__name__ == "NeuronRMSNorm"


def test_kernels_own_errors_are_kept(shim: ModuleType, hub: Path) -> None:
    """Offline and not cached: kernels' error already says what to do; the probe does not replace it."""
    shim.apply()
    with pytest.raises(ValueError, match="not available in the local cache"):
        kernels.get_kernel("acme/not-downloaded", version=1)


def test_trust_stays_the_users_choice(shim: ModuleType, hub: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The probe looks at builds with trust (has_kernel runs no repo code); the load gets the caller's value, so
    kernels' own publisher check still decides. Offline it is skipped with a warning, which shows it ran."""
    shim.apply()
    skipped = "Skipping publisher trust check for 'acme/rmsnorm-neuron'"
    with caplog.at_level(logging.WARNING):
        kernels.get_kernel("acme/rmsnorm-neuron", version=1)
    assert caplog.text.count(skipped) == 1  # the load's check, with trust_remote_code=False as called
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        kernels.get_kernel("acme/rmsnorm-neuron", version=1, trust_remote_code=True)
    assert skipped not in caplog.text


def test_a_diffusers_hub_attention_backend_fails_at_set_attention_backend(
    shim: ModuleType, hub: Path, tmp_path: Path
) -> None:
    """diffusers' ``flash_hub`` backend fetches kernels-community/flash-attn2 with get_kernel when it is set.

    The ``diffusers_attention`` patch turns that backend into native SDPA first (with a warning); with it
    turned off, as a user may, the kernels patch is what the call meets."""
    pytest.importorskip("diffusers")
    from diffusers import FluxTransformer2DModel

    cache_kernel(
        hub, "kernels-community/flash-attn2", build_kernel_repo(tmp_path / "fa2", "flash-attn2", CUDA_ONLY), version=3
    )
    shim.apply(skip=["diffusers_attention"])
    model = FluxTransformer2DModel(
        patch_size=1,
        in_channels=4,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=8,
        num_attention_heads=2,
        joint_attention_dim=16,
        pooled_projection_dim=16,
        axes_dims_rope=(2, 2, 4),
    )
    with pytest.raises(NeuronKernelMissing) as missing:
        model.set_attention_backend("flash_hub")
    assert str(missing.value).startswith(
        'get_kernel("kernels-community/flash-attn2") on Neuron: the repo has no Neuron'
    )
    assert 'diffusers: set_attention_backend("native")' in str(missing.value)


def test_nothing_changes_off_neuron(shim: ModuleType, hub: Path, tiny_qwen: Path) -> None:
    """Applied, then the device goes away (``torch.neuron`` stays, unavailable): every path is upstream's."""
    from transformers import AutoModelForCausalLM

    from neuroncompat import simulator

    shim.apply()
    simulator.disable()
    try:
        with pytest.raises(ValueError, match="Kernels are not available"):
            AutoModelForCausalLM.from_pretrained(tiny_qwen, use_kernels=True)
        with pytest.raises(FileNotFoundError) as missing:
            kernels.get_kernel("kernels-community/activation", version=1)
        assert not isinstance(missing.value, NeuronKernelMissing)
    finally:
        simulator.enable(cores=2)


def test_disabled_by_name(shim: ModuleType, hub: Path, tiny_qwen: Path) -> None:
    from transformers import AutoModelForCausalLM

    shim.apply(skip=["kernels"])
    assert shim.status()["kernels"].state == "disabled"
    with pytest.raises(ValueError, match="Kernels are not available"):
        AutoModelForCausalLM.from_pretrained(tiny_qwen, device_map="neuron", use_kernels=True)
    with pytest.raises(FileNotFoundError) as missing:
        kernels.get_kernel("kernels-community/activation", version=1)
    assert not isinstance(missing.value, NeuronKernelMissing)


def test_doctor_reports_kernels_the_range_and_the_neuron_mappings(shim: ModuleType, hub: Path) -> None:
    from neuroncompat import doctor

    shim.apply()
    mapping = {
        "RMSNorm": {
            "neuron": kernels.LayerRepository(repo_id="acme/rmsnorm-neuron", layer_name="NeuronRMSNorm", version=1)
        }
    }
    with kernels.use_kernel_mapping(mapping):
        lines = doctor.report()
    start = lines.index(f"Hub kernels: kernels {kernels.__version__}")
    assert lines[start + 1 : start + 6] == [
        "  transformers accepts it (kernels>=0.18.2,<0.19.0): no: use_kernels=True raises after the weights load "
        "(on Neuron the kernels patch drops it)",
        '  transformers\' default kernel mapping: has no "neuron" entry (use_kernels=True alone keeps the original layers)',
        "  Neuron layer mappings registered in this process: RMSNorm -> acme/rmsnorm-neuron",
        f"  legacy torch-universal builds: refused on Neuron by the kernels patch ({UNIVERSAL_ENV}=1 accepts them)",
        "  LOCAL_KERNELS: (unset)",
    ]
    assert "  kernels        " + kernels.__version__ in lines
