"""Fix safety in every report, and `--safe-only`, on `examples/finetune_cuda.py`.

Its migration makes 9 rewrites under 8 rules; 5 rewrites can change what the script does (fp16 -> bf16 twice,
the disabled GradScaler, `drop_last`, padding to 128). Its `--device` default `"cuda"` -> `"neuron"` is safe: safety is
said per rewrite, so NM102 is not marked unsafe for another rule's CUDA generator. A reviewer must see
which, where, and why in each format, and a team must be able to land the safe part alone first.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner
from libcst.metadata import MetadataWrapper, PositionProvider

from migrate.cli import main
from migrate.cold_statements import statement_spans
from migrate.engine import _line_map
from migrate.statement_lines import from_spans, rendered_lines

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "finetune_cuda.py"
UNSAFE = {27: ["NM305", "NM306"], 32: ["NM205"], 38: ["NM202", "NM204"]}
SAFE = {11: ["NM102"], 16: ["NM104"], 49: ["NM302"], 52: ["NM104"]}
SUMMARY = "5 of 9 rewrites change behaviour: review them (NM202, NM204, NM205, NM305, NM306)"


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(EXAMPLE, tmp_path / "train.py")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "train.py"


def _run(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return done.exit_code, done.stdout, done.stderr


def _by_line(pairs: list[tuple[int, str]]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for line, rule in sorted(pairs):
        found.setdefault(line, []).append(rule)
    return found


def test_text_counts_the_unsafe_rewrites_and_marks_each_at_its_line(script: Path) -> None:
    code, _, summary = _run("--check", "train.py")
    assert code == 1
    assert SUMMARY in summary
    assert "  NM202 fp16-dtype: 1 (unsafe)" in summary and "  NM104 cuda-api: 2\n" in summary
    marked = [line.split(": ")[1:3] for line in summary.splitlines() if line.startswith("  unsafe: ")]
    assert _by_line([(int(where.split(":")[1]), rule.split()[0]) for where, rule in marked]) == UNSAFE
    assert "  unsafe: train.py:38: NM202 fp16-dtype: bf16 keeps fewer mantissa bits than fp16" in summary


def test_markdown_says_how_many_are_unsafe_and_marks_each_rule(script: Path) -> None:
    _, comment, _ = _run("--format", "markdown", "train.py")
    assert f":warning: **{SUMMARY}**" in comment
    assert "- **NM205** `grad-scaler` ×1 (line 32): " in comment
    assert "**unsafe:** the disabled scaler no longer scales the loss" in comment
    nm302 = next(line for line in comment.splitlines() if line.startswith("- **NM302**"))
    assert "(line 49)" in nm302 and "unsafe" not in nm302


def test_sarif_gives_one_result_per_rewrite_at_its_line_with_its_rule_and_safety(script: Path) -> None:
    code, out, _ = _run("--format", "sarif", "--check", "train.py")
    assert code == 1
    run = json.loads(out)["runs"][0]
    assert len(run["results"]) == 9  # one per rewrite, no per-file "pending-rewrite" result any more
    lines: dict[str, list[tuple[int, str]]] = {"unsafe": [], "safe": []}
    for result in run["results"]:
        assert result["level"] == "error"  # --check
        line = result["locations"][0]["physicalLocation"]["region"]["startLine"]
        lines[result["properties"]["safety"]].append((line, result["ruleId"]))
        assert ("Unsafe, review it: " in result["message"]["text"]) == (result["properties"]["safety"] == "unsafe")
    assert _by_line(lines["unsafe"]) == UNSAFE and _by_line(lines["safe"]) == SAFE
    assert "pending-rewrite" not in {rule["id"] for rule in run["tool"]["driver"]["rules"]}


def test_github_annotates_each_rewrite_at_its_line(script: Path) -> None:
    _, out, _ = _run("--format", "github", "train.py")
    annotations = [line for line in out.splitlines() if line.startswith("::notice file=train.py,line=")]
    assert len(annotations) == 9
    assert "::notice file=train.py,line=32,title=NM205 grad-scaler (unsafe)::would rewrite: " in out
    assert "::notice file=train.py,line=49,title=NM302 static-cache::would rewrite: " in out


def test_safe_only_lands_the_safe_part_and_leaves_the_unsafe_rest_for_review(script: Path) -> None:
    code, _, summary = _run("--safe-only", "--write", "train.py")
    assert code == 0 and "change behaviour" not in summary
    landed = script.read_text()
    assert "torch.neuron.is_available()" in landed and 'default="neuron"' in landed and "torch.float16" in landed
    code, _, summary = _run("--check", "train.py")  # what is left is exactly the unsafe part
    assert code == 1
    assert "5 of 5 rewrites change behaviour: review them (NM202, NM204, NM205, NM305, NM306)" in summary


def test_statement_lines_agree_with_libcst_positions_on_the_fixtures() -> None:
    for path in sorted((ROOT / "fixtures").rglob("*.py"))[:40]:
        data = path.read_bytes()
        module = cst.parse_module(data)
        statements = [n for n in _walk(module) if isinstance(n, cst.SimpleStatementLine | cst.BaseCompoundStatement)]
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        expected = {n: positions[n].start.line for n in statements}
        assert rendered_lines(module, set(statements)) == expected, path
        assert from_spans(module, set(statements), statement_spans(ast.parse(data).body)) == expected, path


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    found = [node]
    for child in node.children:
        found += _walk(child)
    return found


def test_a_later_pass_rewrite_is_located_in_the_file_as_read() -> None:
    back = _line_map("a\nb\nc\n", "import x\na\nb2\nc\n")  # pass 1 added a line and changed b
    assert [back(n) for n in (1, 2, 3, 4, None)] == [1, 1, 2, 3, None]
