"""``--cpu-fallback-op`` / ``cpu-fallback-ops`` take composite ops and refuse names that match no operator.

A composite op (``aten::layer_norm``, ``matmul``, ``dropout``) reaches a backend only as the ops it
decomposes into, so watching it at the backend saw nothing and the user's setting was silently a
no-op. The simulator now reports it where it is called (the decomposition, gradients included,
runs as before); a name torch does not know is an error naming it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from helpers import run_python

from neuroncompat.simulate import kinds, op_findings, report
from neuroncompat.simulate.record import Recorder


def test_composite_ops_named_as_cpu_fallbacks_are_reported_at_the_callers_line(
    neuron: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(kinds.FALLBACK_ENV, "aten::layer_norm,aten::matmul,aten::dropout")
    torch.manual_seed(0)
    weights = torch.randn(4, 4)
    recorder = Recorder()
    recorder.start()
    try:
        x = weights.to("neuron").requires_grad_(True)
        normed = F.layer_norm(x, (4,))
        line = sys._getframe().f_lineno - 1
        product = normed @ x.T
        (normed.sum() + product.sum()).backward()
    finally:
        recorder.stop()
    built = report.build([recorder.snapshot()], ["python", "t.py"], 0)
    found = {(f["what"], f["where"]) for f in built["ranks"][0]["findings"] if f["kind"] == "cpu_fallback"}
    here = "tests/test_simulate_composite_fallback_ops.py"
    assert found == {
        (
            "aten::layer_norm",
            f"{here}:{line} (test_composite_ops_named_as_cpu_fallbacks_are_reported_at_the_callers_line)",
        ),
        (
            "aten::matmul",
            f"{here}:{line + 2} (test_composite_ops_named_as_cpu_fallbacks_are_reported_at_the_callers_line)",
        ),
    }
    reference = weights.clone().requires_grad_(True)
    normed_cpu = F.layer_norm(reference, (4,))
    (normed_cpu.sum() + (normed_cpu @ reference.T).sum()).backward()
    assert torch.equal(x.grad.cpu(), reference.grad)  # the decomposition still records its gradients


def test_an_operator_name_torch_lacks_is_refused() -> None:
    assert op_findings.unknown_operators(["aten::layer_norm", "aten::add.Tensor", "aten::cumsum"]) == []
    assert op_findings.unknown_operators(["aten::layer_norn", "aten::add.Tensr"]) == [
        "aten::layer_norn",
        "aten::add.Tensr",
    ]


@pytest.mark.slow
def test_simulate_refuses_an_unknown_operator_from_the_flag_and_from_pyproject(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('ran')\n")
    command = "from neuroncompat.cli import main; main({args!r})"
    flag = run_python(
        command.format(args=["simulate", "--cpu-fallback-op", "aten::layer_norn", "--", sys.executable, "train.py"]),
        cwd=tmp_path,
    )
    assert flag.returncode == 2 and "ran" not in flag.stdout
    assert "--cpu-fallback-op" in flag.stderr and "aten::layer_norn: no such operator in torch" in flag.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.neuroncompat.simulate]\ncpu-fallback-ops = ["aten::cumsun"]\n')
    configured = run_python(command.format(args=["simulate", "--", sys.executable, "train.py"]), cwd=tmp_path)
    assert configured.returncode == 2 and "ran" not in configured.stdout
    assert (
        f"{tmp_path / 'pyproject.toml'}:2: [tool.neuroncompat.simulate] cpu-fallback-ops: aten::cumsun"
        in configured.stderr
    )
