"""docs/rules.md is generated from the registry and must not drift from it."""

from pathlib import Path

from click.testing import CliRunner

from migrate.cli import main
from migrate.docs import rules_markdown

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
