"""One finding reads the same in every command's report: each command's own report path renders it through the
shared renderers (`neuroncompat_report.text`, `.markdown`, `.github`), so the line a user sees is identical.

The finding: a graph break at `train.py:12`, seen twice. Each command gets it as its report holds it (a check
stage's `findings` entry, a simulate rank's finding, a neuron-migrate file result's TODO) and its report is
searched for the line the shared renderer gives. GitHub annotations and SARIF: tests/test_report_model.py (migrate's
snapshots hold them byte for byte).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuroncompat.check import report as check_report
from neuroncompat.simulate import github as simulate_github
from neuroncompat.simulate import markdown as simulate_markdown
from neuroncompat.simulate import report as simulate_report
from neuroncompat_report import github, markdown, text
from neuroncompat_report.model import Finding

SEEN = Finding("any", "graph_break", "warning", "train.py", 12, "print() inside the step (x2)")
LINE = "warning: train.py:12: graph_break print() inside the step (x2)"


def _check_result() -> dict[str, object]:
    """A check of one model whose compiled training step broke its graph at the user's line."""
    stage = {
        "stage": "train-compiled",
        "status": "pass",
        "detail": "losses equal the CPU's",
        "seconds": 1.5,
        "graphs": 2,
        "graph_triggers": [],
        "findings": [
            {"kind": "graph_break", "what": "print() inside the step", "site": "train.py:12 (step)", "count": 2}
        ],
        "patches": [],
    }
    return {
        "schema": "neuroncompat.check/1",
        "model": "tiny",
        "architecture": "LlamaForCausalLM",
        "model_type": "llama",
        "dtype": "float32",
        "layers": 1,
        "parameters": 1000,
        "seconds": 2.0,
        "stages": [stage],
        "exit_code": 0,
    }


def _simulate_report() -> dict[str, object]:
    """A dry run whose one rank broke its graph twice at the user's line, as the recorder writes the rank."""
    found = {"kind": "graph_break", "what": "print() inside the step", "graph": None, "count": 2}
    record = {"rank": 0, "pid": 1, "world_size": 1, "compiled": [], "eager": [], "dropped_calls": 0}
    record["findings"] = [{**found, "site": "train.py:12 (step)", "user": "train.py:12 (step)"}]
    return simulate_report.build([record], ["python", "train.py"], 0)


def test_the_shared_text_line_names_severity_place_rule_and_message() -> None:
    assert text.line(SEEN) == LINE
    assert (
        text.line(Finding("t", "cpu_fallback", "note", None, None, "aten::histc")) == "note: cpu_fallback aten::histc"
    )


def test_check_renders_its_finding_with_the_shared_lines() -> None:
    result = _check_result()
    assert f"{'':<26} {LINE}" in check_report.render_text(result).splitlines()
    assert f"| {markdown.line(SEEN)} |" in check_report.render_markdown(result)
    assert markdown.line(SEEN) == "`train.py:12`: **graph_break** print() inside the step (x2)"


def test_migrate_renders_a_todo_with_the_same_lines() -> None:
    from migrate.formats import markdown as migrate_markdown
    from migrate.formats import text as migrate_text
    from migrate.results import FileResult
    from migrate.results import Finding as Todo

    result = FileResult("train.py", "unchanged", todos=[Todo("graph_break", "print() inside the step (x2)", 12)])
    assert f"  {LINE}" in migrate_text.render([result], "check").splitlines()
    assert f"- {markdown.line(SEEN)}" in migrate_markdown.render([result], "check").splitlines()


def test_a_notebooks_todo_is_placed_at_its_cell_in_every_format() -> None:
    """A notebook cell's lines are not the JSON file's: the finding has no line, its region names cell and line."""
    from migrate.formats import text as migrate_text
    from migrate.formats.notes import note
    from migrate.results import FileResult
    from migrate.results import Finding as Todo

    todo = Todo("NM901", "vLLM does not run on Neuron", 3, 2)
    lines = migrate_text.render([FileResult("demo.ipynb", "unchanged", todos=[todo])], "check").splitlines()
    assert "  warning: demo.ipynb (cell 2, line 3): NM901 vLLM does not run on Neuron" in lines
    found = note("warning", "demo.ipynb", todo)
    assert markdown.line(found) == "`demo.ipynb (cell 2, line 3)`: **NM901** vLLM does not run on Neuron"
    assert (
        github.annotation(found)
        == "::warning file=demo.ipynb,title=NM901::cell 2, line 3: vLLM does not run on Neuron\n"
    )


def test_simulate_renders_its_finding_with_the_same_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = _simulate_report()
    assert f"  {LINE}" in simulate_report.render_text(built).splitlines()
    assert f"| 0 | {markdown.line(SEEN)} |" in simulate_markdown.render(built)
    monkeypatch.chdir(tmp_path)  # GitHub places an annotation only in a file of the checkout
    (tmp_path / "train.py").write_text("print()\n")
    (annotation,) = simulate_github.render(built).splitlines()
    assert annotation.startswith(
        "::warning file=train.py,line=12,title=neuroncompat simulate%3A graph break::"
        "rank 0: print() inside the step (x2)%0Afix: "
    )


def test_a_strict_kind_is_an_error_in_every_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no train.py here: the annotation names no file
    built = _simulate_report()
    built["strict"]["kinds"] = ["graph_break"]  # as --strict-kind graph_break selects it
    assert f"  {LINE.replace('warning:', 'error:', 1)}" in simulate_report.render_text(built).splitlines()
    assert simulate_github.render(built).startswith("::error title=neuroncompat simulate%3A graph break::rank 0:")


def test_a_library_line_under_the_users_stays_in_the_message() -> None:
    """The user's line places the finding; the library line that made the call is said in the message."""
    found = {"kind": "graph_break", "what": "print() inside the step", "graph": None, "count": 1}
    record = {"rank": 0, "pid": 1, "world_size": 1, "compiled": [], "eager": [], "dropped_calls": 0}
    record["findings"] = [{**found, "site": "trl/trainer/utils.py:40 (pad)", "user": "train.py:5 (<module>)"}]
    text = simulate_report.render_text(simulate_report.build([record], ["python", "train.py"], 0))
    assert "  warning: train.py:5: graph_break print() inside the step (in trl/trainer/utils.py:40 (pad)) (x1)" in text
