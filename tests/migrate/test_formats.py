"""Report formats: snapshots of every format on one tree, schema validation, escaping, colour.

The tree has a Python script with a rewrite and a TODO, a file that does not parse, a clean
file, a recipe, a launcher with a note, and a notebook. Regenerate the snapshots after an
intended change with `NEURON_MIGRATE_UPDATE_SNAPSHOTS=1 pytest tests/migrate/test_formats.py`
and review them in `git diff`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import nbformat
import pytest
from click.testing import CliRunner

from migrate.cli import main
from migrate.formats import FORMATS, markdown
from migrate.formats.json import tool_version
from neuroncompat_report.github import annotation
from neuroncompat_report.model import Finding

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SNAPSHOTS = HERE / "snapshots"
SUFFIX = {"text": "txt", "json": "json", "markdown": "md", "github": "github.txt", "sarif": "sarif.json"}


def make_tree(root: Path) -> None:
    (root / "train.py").write_text(
        'import torch\nimport vllm\n\nif __name__ == "__main__":\n    x = torch.zeros(2).cuda()\n    print("done")\n'
    )
    (root / "broken.py").write_text("import torch\ndef f(:\n    torch.cuda.empty_cache()\n")
    (root / "clean.py").write_text("import os\n\nprint(os.getcwd())\n")
    (root / "recipe.yaml").write_text(
        "# SFT recipe\nmodel_name_or_path: gpt2\nattn_implementation: flash_attention_2\nload_in_4bit: true\n"
    )
    (root / "launch.sh").write_text(
        "#!/bin/bash\nCUDA_VISIBLE_DEVICES=1 neuron_parallel_compile torchrun train.py --fp16\n"
    )
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# Demo"),
        nbformat.v4.new_code_cell("!nvidia-smi"),
        nbformat.v4.new_code_cell("import torch\ny = torch.ones(1).cuda()"),
    ]
    for number, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{number}"  # nbformat makes random ids; the snapshot needs fixed ones
    nbformat.write(notebook, root / "demo.ipynb")


@pytest.fixture
def tree(tmp_path: Path, monkeypatch) -> Path:
    make_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def report(fmt: str, *extra: str) -> tuple[str, int]:
    result = CliRunner().invoke(main, ["--check", "--format", fmt, *extra, "."])
    out = result.stdout if fmt != "text" else result.stdout + "--- stderr ---\n" + result.stderr
    return out.replace(tool_version(), "VERSION"), result.exit_code


@pytest.mark.parametrize("fmt", FORMATS)
def test_snapshot(tree, fmt):
    out, code = report(fmt)
    assert code == 2  # broken.py does not parse
    snapshot = SNAPSHOTS / f"report.{SUFFIX[fmt]}"
    if os.environ.get("NEURON_MIGRATE_UPDATE_SNAPSHOTS"):
        snapshot.write_text(out)
    assert out == snapshot.read_text(), f"{fmt} output changed; see the module docstring to update"


def test_order_does_not_depend_on_the_command_line(tree):
    forward = CliRunner().invoke(main, ["--format", "json", "train.py", "launch.sh", "broken.py"]).stdout
    backward = CliRunner().invoke(main, ["--format", "json", "broken.py", "launch.sh", "train.py"]).stdout
    assert forward == backward


def test_json_validates_against_the_documented_schema(tree):
    schema = json.loads((ROOT / "docs" / "migrate.schema.json").read_text())
    out, _ = report("json")
    jsonschema.Draft202012Validator(schema).validate(json.loads(out))
    written = CliRunner().invoke(main, ["--write", "--format", "json", "."]).stdout
    document = json.loads(written)
    jsonschema.Draft202012Validator(schema).validate(document)
    assert document["mode"] == "write" and document["summary"]["changed"] == 4


def test_sarif_validates_against_the_sarif_2_1_0_schema(tree):
    schema = json.loads((HERE / "schemas" / "sarif-2.1.0.json").read_text())
    document = json.loads(report("sarif")[0])
    jsonschema.Draft4Validator(schema).validate(document)
    run = document["runs"][0]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rule_ids == sorted(rule_ids) and "NM901" in rule_ids and "parse-error" in rule_ids
    assert all(run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"] for r in run["results"])


def test_github_annotations_escape_their_values():
    finding = Finding("neuron-migrate", "NM901", "warning", "a,b:c.py", 3, "50% done\nnext", title="NM901 vllm")
    assert annotation(finding) == "::warning file=a%2Cb%3Ac.py,line=3,title=NM901 vllm::50%25 done%0Anext\n"


def test_markdown_leaves_out_diffs_past_the_comment_size_limit(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    body = "import torch\n" + "".join(f"x{i} = torch.zeros({i}).cuda()\n" for i in range(3000))
    (tmp_path / "big.py").write_text(body)
    (tmp_path / "small.py").write_text("import torch\ny = torch.zeros(1).cuda()\n")
    out = CliRunner().invoke(main, ["--format", "markdown", "."]).stdout
    assert len(out) < 65_536
    assert out.startswith(markdown.MARKER)
    assert "_Diff left out" in out  # big.py
    assert '+y = torch.zeros(1).to("neuron")' in out  # small.py still has its diff


def test_colour_only_on_a_terminal(tree, monkeypatch):
    plain = CliRunner().invoke(main, ["train.py"]).stdout
    assert "\x1b[" not in plain and '+    x = torch.zeros(2).to("neuron")' in plain
    coloured = CliRunner().invoke(main, ["train.py"], color=True).stdout
    assert '\x1b[32m+    x = torch.zeros(2).to("neuron")' in coloured
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in CliRunner().invoke(main, ["train.py"], color=True).stdout
