"""Golden fixtures for Optimum Neuron and torch_xla scripts (NM5xx, NM6xx), compared exactly.

Besides what every fixture set checks (exact output, parses, idempotent, `--check`/`--write`),
the point of porting these scripts is that nothing of the old stack is left: optimum-neuron
cannot be installed next to transformers 5 and torch_xla must not be importable with
TorchNeuron, so no migrated fixture may import either.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_fixtures import assert_check_write_check, assert_golden

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "optimum"
CASES = sorted(p for p in FIXTURES.glob("*.py") if not p.name.endswith(".expected.py"))


def _imported_modules(code: bytes) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.append(node.module)
    return modules


def test_there_are_enough_fixtures():
    assert len(CASES) >= 10


@pytest.mark.parametrize("source", CASES, ids=[p.stem for p in CASES])
def test_fixture(source: Path):
    migrated = assert_golden(source)
    legacy = [m for m in _imported_modules(source.read_bytes()) if m.startswith(("optimum.neuron", "torch_xla"))]
    assert legacy, "each fixture is an Optimum Neuron or torch_xla script"
    left = [m for m in _imported_modules(migrated) if m.startswith(("optimum", "torch_xla"))]
    assert left == [], f"legacy imports left: {left}"


def test_check_write_check_over_all_fixtures(tmp_path: Path):
    assert_check_write_check(CASES, tmp_path)
