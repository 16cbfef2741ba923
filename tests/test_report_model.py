"""The shared report model (`neuroncompat_report`): one finding reads the same whichever command found it.

`neuron-migrate`'s SARIF and GitHub formats render through these renderers (their snapshots in
`tests/migrate/snapshots` hold them byte for byte); here a finding of another tool goes through the same ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuroncompat_report import github, sarif
from neuroncompat_report.model import Finding, Fix, RuleInfo, Run

ROOT = Path(__file__).resolve().parent.parent
SARIF_SCHEMA = ROOT / "tests" / "migrate" / "schemas" / "sarif-2.1.0.json"
RULE = RuleInfo(
    "graph_break",
    "graph-break",
    "Dynamo broke the graph here: Neuron compiles each piece apart.",
    "A graph break splits one compiled step into several graphs.",
    "## graph_break",
    "warning",
    "safe",
)


def _finding(tool: str) -> Finding:
    return Finding(tool, "graph_break", "warning", "train.py", 12, "print() inside the step", fix=Fix("safe"))


def test_a_finding_of_any_tool_renders_alike_in_sarif_and_validates() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    documents = {}
    for tool in ("neuroncompat simulate", "neuroncompat check"):
        text = sarif.render(Run(tool, "0.1.0", findings=(_finding(tool),), rules={"graph_break": RULE}))
        document = json.loads(text)
        jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(document)
        documents[tool] = document["runs"][0]
    simulate, check = documents["neuroncompat simulate"], documents["neuroncompat check"]
    assert simulate["results"] == check["results"]
    assert simulate["results"][0]["locations"][0]["physicalLocation"]["region"] == {"startLine": 12}
    assert simulate["results"][0]["properties"] == {"safety": "safe"}
    assert simulate["tool"]["driver"]["rules"][0]["defaultConfiguration"] == {"level": "warning"}


def test_github_titles_a_finding_with_its_rule_and_marks_an_unsafe_fix() -> None:
    finding = _finding("neuroncompat check")
    assert github.render([finding], {"graph_break": RULE}) == (
        "::warning file=train.py,line=12,title=graph_break graph-break::print() inside the step\n"
    )
    unsafe = Finding("neuron-migrate", "NM202", "note", "t.py", 3, "would rewrite", fix=Fix("unsafe", "numerics"))
    assert github.annotation(unsafe) == "::notice file=t.py,line=3,title=NM202 (unsafe)::would rewrite\n"


def test_migrate_describes_its_run_in_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from migrate.formats.findings import run
    from migrate.options import Options
    from migrate.runner import run as migrate

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    (tmp_path / "clean.py").write_text("x = 1\n")
    described = run(migrate([Path("clean.py"), Path("train.py")], Options(), jobs=1, write=False), "check")
    assert described.inputs == ("clean.py", "train.py") and described.verdict == "changes needed"
    assert (described.counts["files"], described.counts["changed"], described.counts["rewrites"]) == (2, 1, 1)
    assert [(f.rule, f.file, f.line, f.severity) for f in described.findings] == [("NM101", "train.py", 2, "error")]
