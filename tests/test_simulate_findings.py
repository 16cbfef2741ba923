"""``neuroncompat simulate`` findings: graph breaks, data-dependent-shape ops, CPU fallbacks and complex,
float64 and int64 tensors on the device, each at the user's line with its fix; ``--strict`` and ``[tool.neuroncompat.simulate]``; the report
formats (JSON validated against docs/simulate-report.schema.json, markdown, GitHub annotations)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from helpers import run_python

from neuroncompat.simulate import github, kinds, markdown, report, settings
from neuroncompat.simulate.record import Recorder

Run = tuple[int, str, dict[str, Any]]  # exit code, console output, JSON report
SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "simulate-report.schema.json").read_text())

# Each line the report must name ends with a marker comment.
FINDINGS_SCRIPT = """\
import sys
import torch


def step(x):
    y = x * 2
    print("inside the compiled step")  # BREAK
    return y + 1


compiled = torch.compile(step, backend="neuron")
x = torch.ones(4, device="neuron")
compiled(x)
mask = x > 0
x[mask] = 0.0  # MASKED
positions = torch.nonzero(mask)  # NONZERO
totals = torch.cumsum(x, 0)  # FALLBACK
print("script done")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""

CLEAN_SCRIPT = """\
import torch

step = torch.compile(lambda x: torch.where(x > 0, x, 0.0) * 2, backend="neuron")
x = torch.ones(4, device="neuron")
print(step(x).sum().item())
"""

PYPROJECT = """\
[project]
name = "user-project"

[tool.neuroncompat.simulate]
strict = true
cpu-fallback-ops = ["aten::cumsum"]
"""


def _line(marker: str) -> int:
    return next(number for number, line in enumerate(FINDINGS_SCRIPT.splitlines(), 1) if line.endswith(f"# {marker}"))


def _simulate(*args: str, cwd: Path) -> tuple[int, str, str]:
    result = run_python(f"from neuroncompat.cli import main; main({list(args)!r})", cwd=cwd)
    return result.returncode, result.stdout, result.stderr


# the tests share a module fixture that starts fresh processes: one pytest worker runs them all
pytestmark = pytest.mark.xdist_group("simulate_findings_strict_run")


@pytest.fixture(scope="module")
def strict_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The findings script under strict settings from pyproject.toml, with the JSON report."""
    project = tmp_path_factory.mktemp("project")
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "train.py").write_text(FINDINGS_SCRIPT)
    code, out, err = _simulate(
        "simulate", "--format", "json", "-o", "report.json", "--", sys.executable, "train.py", cwd=project
    )
    return code, out + err, json.loads((project / "report.json").read_text())


@pytest.mark.slow
def test_each_finding_is_reported_at_the_users_line_with_its_fix(strict_run: Run) -> None:
    _, _, built = strict_run
    (rank,) = built["ranks"]
    found = {(f["kind"], f["where"]): f for f in rank["findings"]}
    assert set(found) == {
        ("graph_break", f"train.py:{_line('BREAK')} (step)"),
        ("data_dependent", f"train.py:{_line('MASKED')} (<module>)"),
        ("data_dependent", f"train.py:{_line('NONZERO')} (<module>)"),
        ("cpu_fallback", f"train.py:{_line('FALLBACK')} (<module>)"),
    }, rank["findings"]
    assert "print" in found["graph_break", f"train.py:{_line('BREAK')} (step)"]["what"]
    masked = found["data_dependent", f"train.py:{_line('MASKED')} (<module>)"]
    assert masked["what"] == "aten::index_put_" and masked["fix"]["id"] == "torch_where"
    assert masked["references"] == ["https://github.com/aws-neuron/aws-neuron-sdk/issues/1381"]
    assert found["data_dependent", f"train.py:{_line('NONZERO')} (<module>)"]["fix"]["id"] == "nonzero_static"
    assert found["cpu_fallback", f"train.py:{_line('FALLBACK')} (<module>)"]["what"].startswith("aten::cumsum")
    assert (rank["graph_breaks"], rank["data_dependent_ops"], rank["cpu_fallback_ops"]) == (1, 2, 1)


@pytest.mark.slow
def test_strict_from_pyproject_fails_the_run_and_the_json_validates(strict_run: Run) -> None:
    code, output, built = strict_run
    assert code == kinds.STRICT_EXIT_CODE == built["simulate_exit_code"]
    assert built["exit_code"] == 0 and "inside the compiled step" in output and "script done" in output
    assert {v["kind"] for v in built["strict"]["violations"]} == {"graph_break", "data_dependent", "cpu_fallback"}
    jsonschema.validate(built, SCHEMA)


@pytest.mark.slow
def test_strict_passes_a_clean_script(tmp_path: Path) -> None:
    (tmp_path / "clean.py").write_text(CLEAN_SCRIPT)
    code, out, err = _simulate("simulate", "--strict", "--", sys.executable, "clean.py", cwd=tmp_path)
    assert code == 0, out + err
    kinds = (
        "rejected, shape_churn, graph_break, data_dependent, cpu_fallback, complex_on_device, fp64_on_device, "
        "step_recompile"
    )
    assert f"strict ({kinds}): passed" in out


@pytest.mark.slow
def test_the_scripts_own_failure_wins_over_strict(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(FINDINGS_SCRIPT)
    code, out, err = _simulate(
        "simulate", "--strict-kind", "data_dependent", "--", sys.executable, "train.py", "3", cwd=tmp_path
    )
    assert code == 3, out + err
    verdict = "strict (data_dependent): FAILED: 2 finding(s) of kind data_dependent (the script's exit code 3 is kept)"
    assert verdict in out
    assert f"  error: train.py:{_line('NONZERO')}: data_dependent nonzero [aten::nonzero] (x1)" in out


def test_ci_formats_place_findings_on_the_users_lines(
    strict_run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, built = strict_run
    (tmp_path / "train.py").write_text(FINDINGS_SCRIPT)
    monkeypatch.chdir(tmp_path)  # annotations name files that exist relative to the working directory
    annotations = github.render(built).splitlines()
    assert len(annotations) == 4 and all(a.startswith("::error file=train.py,line=") for a in annotations)
    masked = f"::error file=train.py,line={_line('MASKED')},title=neuroncompat simulate%3A data-dependent shape::"
    assert any(a.startswith(masked) for a in annotations)
    comment = markdown.render(built)
    assert comment.startswith(markdown.MARKER) and "strict: **FAILED** (4 finding(s))" in comment
    assert f"| 0 | `train.py:{_line('FALLBACK')}`: **cpu_fallback** aten::cumsum" in comment


def test_graph_inputs_are_named_and_parameters_summarised(neuron: object) -> None:
    recorder = Recorder()
    recorder.start()
    try:
        layer = torch.nn.Linear(4, 4).to("neuron")
        step = torch.compile(lambda input_ids, attention_mask: layer(input_ids) * attention_mask, backend="neuron")
        step(torch.ones(2, 4, device="neuron"), torch.ones(2, 4, device="neuron"))
    finally:
        recorder.stop()
    built = report.build([recorder.snapshot()], ["python", "named.py"], 0)
    (group,) = built["ranks"][0]["compiled"]
    inputs = group["graphs"][0]["inputs"]
    assert {(i["name"], i["parameter"]) for i in inputs} == {
        ("input_ids", False),
        ("attention_mask", False),
        ("layer.weight", True),
        ("layer.bias", True),
    }
    text = report.render_text(built)
    assert "input_ids float32[2,4]" in text and "attention_mask float32[2,4] (+2 parameters/buffers)" in text
    jsonschema.validate(json.loads(report.render_json(built)), SCHEMA)


def test_a_masked_assignment_inside_a_compiled_graph_is_reported_at_its_line(neuron: object) -> None:
    recorder = Recorder()
    recorder.start()
    try:

        def clamp_padding(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            x = x.clone()
            x[mask] = 0.0
            return x

        line = clamp_padding.__code__.co_firstlineno + 2
        compiled = torch.compile(clamp_padding, backend="neuron")
        for _ in range(3):  # reported once: later runs repeat the first
            compiled(torch.ones(4, device="neuron"), torch.ones(4, dtype=torch.bool, device="neuron"))
    finally:
        recorder.stop()
    (finding,) = report.build([recorder.snapshot()], ["python", "t.py"], 0)["ranks"][0]["findings"]
    assert finding["kind"] == "data_dependent" and finding["graph"] is not None
    assert finding["where"] == f"tests/test_simulate_findings.py:{line} (clamp_padding)" and finding["count"] == 1


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('strict = ["graph_break", "typo"]', ":6: [tool.neuroncompat.simulate] strict: unknown kind(s) typo"),
        ("max-shapes = 0", ":6: [tool.neuroncompat.simulate] max-shapes: expected an integer >= 1"),
        ('cpu-fallback-ops = ["cumsum"]', ":6: [tool.neuroncompat.simulate] cpu-fallback-ops: expected a list of ATen"),
        ("colour = 1", ":6: [tool.neuroncompat.simulate] colour: unknown key"),
    ],
)
def test_a_malformed_settings_table_names_the_file_line_and_key(tmp_path: Path, table: str, message: str) -> None:
    table = f"[project]\nname = 'x'\n\n[tool.neuroncompat.simulate]\ngraph-cost = 90\n{table}\n"
    (tmp_path / "pyproject.toml").write_text(table)
    with pytest.raises(settings.SettingsError) as raised:
        settings.load(tmp_path)
    assert str(raised.value).startswith(str(tmp_path / "pyproject.toml") + message)


def test_settings_are_read_from_the_nearest_pyproject(tmp_path: Path) -> None:
    configured = PYPROJECT.replace("strict = true", 'strict = ["rejected"]\nmax-shapes = 8')
    (tmp_path / "pyproject.toml").write_text(configured)
    (tmp_path / "src").mkdir()
    loaded = settings.load(tmp_path / "src")
    assert (loaded.strict, loaded.max_shapes, loaded.cpu_fallback_ops) == (("rejected",), 8, ("aten::cumsum",))


LIBRARY_SCRIPT = """\
import torch
from trl.trainer.utils import nanmax

x = torch.ones(4, device="neuron")
print(nanmax(x).item())  # LIBRARY
"""


@pytest.mark.slow
def test_a_finding_in_library_code_is_addressed_to_its_maintainers(tmp_path: Path) -> None:
    """Found running TRL's GRPO script: findings inside `trl` told the user to edit code they do not own."""
    (tmp_path / "train.py").write_text(LIBRARY_SCRIPT)
    code, out, err = _simulate(
        "simulate", "--format", "json", "-o", "r.json", "--", sys.executable, "train.py", cwd=tmp_path
    )
    assert code == 0, out + err
    built = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(built, SCHEMA)
    (finding,) = built["ranks"][0]["findings"]
    assert finding["where"] == "train.py:5 (<module>)" and finding["site"].startswith("trl/trainer/utils.py:")
    assert finding["owner"] == "trl"
    text = report.render_text(built)
    assert "in trl's code, not yours: report it to trl (the fix there: keep the full shape" in text


def test_a_finding_in_the_users_code_has_no_owner() -> None:
    assert report.owner_of("train.py:5 (<module>)", "train.py:5 (<module>)") is None
    assert report.owner_of("transformers/trainer.py:10 (train)", "train.py:5 (<module>)") == "transformers"
    assert report.owner_of(None, "train.py:5 (<module>)") is None


def test_complex_float64_and_int64_on_the_device_are_reported_saying_what_is_unknown(neuron: object) -> None:
    """The simulated device computes these dtypes exactly; what TorchNeuron does with them is not documented
    (neuroncompat/simulate/dtype_findings.py), so the dry run says where they are and that the outcome is unknown."""
    recorder = Recorder()
    recorder.start()
    try:
        here = sys._getframe().f_lineno
        z = torch.ones(4, dtype=torch.complex64).to("neuron")
        z = z * z
        torch.ones(3, dtype=torch.float64, device="neuron")
        inside = torch.compile(lambda a: (a * 2).sum(), backend="neuron")
        inside(torch.ones(4, dtype=torch.complex64, device="neuron"))  # decomposed by TorchNeuron under compile
        torch.nn.Embedding(8, 4).to("neuron")(torch.arange(3, device="neuron"))
        torch.nn.Embedding(8, 4)(torch.arange(3))  # int64 on the CPU: not the device's
    finally:
        recorder.stop()
    built = report.build([recorder.snapshot()], ["python", "t.py"], 0, strict=kinds.STRICT_DEFAULT)
    (rank,) = built["ranks"]
    found = {(f["kind"], f["where"].split(" ")[0]): f for f in rank["findings"]}
    test = "tests/test_simulate_findings.py"
    assert set(found) == {
        ("complex_on_device", f"{test}:{here + 1}"),
        ("complex_on_device", f"{test}:{here + 2}"),
        ("complex_on_device", f"{test}:{here + 5}"),  # the CPU -> device copy of the compiled call's input
        ("fp64_on_device", f"{test}:{here + 3}"),
        ("int64_on_device", f"{test}:{here + 6}"),
    }, rank["findings"]
    fp64 = found["fp64_on_device", f"{test}:{here + 3}"]
    assert fp64["description"] == "aten::empty.memory_format, aten::fill_.Scalar made a float64 tensor on the device"
    assert (
        "whether TorchNeuron runs float64 on the CPU, narrows it to float32 or fails is not documented"
        in (fp64["unknown"])
    )
    int64 = found["int64_on_device", f"{test}:{here + 6}"]
    assert int64["description"] == "args.0 is an int64 tensor on the device" and int64["fix"]["id"] == "int32_range"
    assert "--native-int64" not in int64["unknown"] and "which compiler flags TorchNeuron uses" in int64["unknown"]
    assert rank["dtype_findings"] == 5
    # --strict alone fails on complex and float64, not on the informational int64.
    assert {v["kind"] for v in built["strict"]["violations"]} == {"complex_on_device", "fp64_on_device"}
    text = report.render_text(built)
    assert text.count("unknown on trn2:") == 2  # once per kind listed; int64 needs no change: counted, not listed
    assert "int64_on_device" not in text
    assert (
        "1 finding(s) need no change (int64 on the device while the values fit in int32); --show-info lists them"
        in text
    )
    listed = report.render_text(built, show_info=True)
    assert listed.count("unknown on trn2:") == 3
    assert f"  note: {test}:{here + 6}: int64_on_device args.0 is an int64 tensor on the device" in listed
    assert f"| 0 | `{test}:{here + 2}`: **complex_on_device** " in markdown.render(built)
    assert "int64 on device" not in markdown.render(built) + github.render(built)
    jsonschema.validate(json.loads(report.render_json(built)), SCHEMA)


def test_int64_inputs_of_compiled_graphs_are_reported_by_name(neuron: object) -> None:
    recorder = Recorder()
    recorder.start()
    try:
        step = torch.compile(lambda input_ids: input_ids + 1, backend="neuron")
        for length in (3, 3):
            step(torch.arange(length, device="neuron"))
    finally:
        recorder.stop()
    (finding,) = report.build([recorder.snapshot()], ["python", "t.py"], 0)["ranks"][0]["findings"]
    assert finding["kind"] == "int64_on_device"
    assert finding["description"] == "input_ids is an int64 tensor on the device, a compiled graph's input"
