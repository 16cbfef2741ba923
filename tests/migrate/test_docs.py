"""docs/rules.md is generated from the registry and must not drift from it; `--explain` finds a rule by id."""

from pathlib import Path

from click.testing import CliRunner

from migrate.cli import main
from migrate.docs import rules_markdown
from migrate.rule_families import all_rules
from migrate.rule_sources import places

ROOT = Path(__file__).resolve().parents[2]


def test_rules_doc_in_sync():
    assert (ROOT / "docs" / "rules.md").read_text(encoding="utf-8") == rules_markdown(), (
        "regenerate with: python -m migrate --rules-doc > docs/rules.md"
    )


def test_explain():
    result = CliRunner().invoke(main, ["--explain", "nm401"])
    assert result.exit_code == 0
    assert "nccl" in result.output and "Before:" in result.output
    assert CliRunner().invoke(main, ["--explain", "NM000"]).exit_code == 2


def test_explain_says_where_the_rule_is_declared_and_applied():
    out = CliRunner().invoke(main, ["--explain", "NM905"]).stdout
    head = out.splitlines()[:4]
    assert head[:2] == ["NM905 custom-kernels", "fix safety: safe"]
    declared = head[2].removeprefix("declared at: ")
    applied = head[3].removeprefix("applied at: ").split(", ")
    path, line = declared.split(":")
    assert path == "migrate/rules/todo_catalogue.py"
    assert 'id="NM905"' in (ROOT / path).read_text().splitlines()[int(line) - 1]  # the line that opens it
    todo_lines = (ROOT / "migrate/rules/todo.py").read_text().splitlines()
    hooks = [int(p.split(":")[1]) for p in applied if p.startswith("migrate/rules/todo.py:")]
    assert any('todo(ctx, "NM905")' in todo_lines[line - 1] for line in hooks)
    assert "## NM905 `custom-kernels`" in out  # then the rule's doc


def test_every_rule_is_declared_in_exactly_one_place():
    assert {rule.id: len(places(rule.id)[0]) for rule in all_rules()} == {rule.id: 1 for rule in all_rules()}
