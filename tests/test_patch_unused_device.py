"""``unused_device``: a process that built a model but placed nothing on a NeuronCore warns at exit.

Issue 27: a script whose every ``.to`` is gated by ``torch.cuda.is_available()`` trained on the CPU
under the shim and exited 0, silently. The runs are fresh interpreters (the warning comes at exit);
the in-process tests check that torch's own ``Parameter.__new__`` is back after the first
parameter, that a compiled model sees nothing of the patch, and that revert undoes it.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from types import ModuleType

import pytest
import torch
from helpers import run_python

GATED = """
import neuroncompat, sys, torch
device = "cuda" if torch.cuda.is_available() else "cpu"   # "cpu" on Neuron
if sys.argv[1:] == ["neuron"]:
    device = "neuron"
model = torch.nn.Linear(4, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = model(torch.randn(3, 4, device=device)).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
if sys.argv[1:] == ["fails"]:
    raise ValueError("bad batch")
print("trained on", model.weight.device)
"""
WARNING = (
    "[unused_device] this process built a model but placed no tensor on a NeuronCore: it computed on the CPU. "
    "A script that picks its device with torch.cuda.is_available() or 'cuda' runs on Neuron as written with "
    "NEURONCOMPAT_CUDA=redirect, or after neuron-migrate rewrites it (NEURONCOMPAT_DISABLE=unused_device silences this)"
)


def _run(*argv: str, **env: str) -> tuple[int, str, str]:
    code = f"import sys; sys.argv = ['train.py', *{list(argv)!r}]\n" + GATED
    result = run_python(code, env={"NEURONCOMPAT_SIMULATE": "1", **env})
    return result.returncode, result.stdout, result.stderr


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_a_run_on_the_cpu_under_the_shim_warns_at_exit() -> None:
    returncode, stdout, stderr = _run()
    assert (returncode, stdout) == (0, "trained on cpu\n")
    assert stderr.splitlines()[-1] == WARNING
    returncode, _, stderr = _run(RANK="1", WORLD_SIZE="2")
    assert returncode == 0 and "this process (rank 1) built a model" in stderr, "each torchrun rank says which it is"
    returncode, stdout, stderr = _run(NEURONCOMPAT_CUDA="redirect")
    assert (returncode, stdout) == (0, "trained on neuron:0\n"), "the fix the warning names"
    assert "[unused_device]" not in stderr


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["neuron"], {}),
        (["fails"], {}),
        ([], {"NEURONCOMPAT_DISABLE": "unused_device"}),
        ([], {"NEURONCOMPAT_SIMULATE": ""}),
    ],
    ids=["on-the-core", "uncaught-error", "disabled-by-name", "off-neuron"],
)
def test_no_warning_when_the_core_was_used_the_run_failed_disabled_or_off_neuron(
    argv: list[str], env: dict[str, str]
) -> None:
    _, _, stderr = _run(*argv, **env)
    assert "[unused_device]" not in stderr


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_a_failed_run_under_python_dash_m_neuroncompat_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(GATED)
    result = run_python(
        "import runpy, sys; sys.argv = ['neuroncompat', 'train.py', 'fails']; runpy.run_module('neuroncompat', run_name='__main__')",
        env={"NEURONCOMPAT_SIMULATE": "1"},
        cwd=tmp_path,
    )
    assert result.returncode == 1 and result.stderr.splitlines()[-1] == "ValueError: bad batch"


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
@pytest.mark.ranks
def test_a_launcher_that_builds_no_model_says_nothing() -> None:
    """torchrun, ``accelerate launch`` and an ``mp.spawn`` parent import torch, start ranks, build no model."""
    result = run_python(
        "import neuroncompat, torch\nx = torch.zeros(3) + 1\nprint(neuroncompat.status()['unused_device'].state)\n",
        env={"NEURONCOMPAT_SIMULATE": "1"},
    )
    assert (result.returncode, result.stdout) == (0, "applied\n")
    assert "[unused_device]" not in result.stderr


def test_torchs_parameter_is_back_after_the_first_and_compile_sees_nothing(shim: ModuleType) -> None:
    from neuroncompat import simulator

    torch_new = torch.nn.Parameter.__dict__["__new__"]
    shim.apply()
    assert torch.nn.Parameter.__dict__["__new__"] is not torch_new
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).to("neuron")
    assert torch.nn.Parameter.__dict__["__new__"] is torch_new
    assert type(model[0].weight) is torch.nn.Parameter and model[0].weight.requires_grad
    compiled = torch.compile(model, backend="neuron")
    x = torch.randn(2, 4, device="neuron")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch.compile(module) warns where global module hooks exist
        compiled(x)
        model[0](x)
        compiled(x)
    assert len(simulator.compiles()) == 1


def test_revert_removes_the_wrapper_and_the_exit_check(shim: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    import atexit

    registered: list[object] = []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(atexit, "unregister", registered.remove)
    torch_new = torch.nn.Parameter.__dict__["__new__"]
    shim.apply()
    assert shim.status()["unused_device"].state == "applied" and len(registered) == 1
    shim.revert()
    assert (torch.nn.Parameter.__dict__["__new__"], registered) == (torch_new, [])
