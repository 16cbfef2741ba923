"""`pytest tests/migrate` works with only the codemod installed (issue 27).

The codemod needs none of the simulator stack, so its tests must not either: a module that runs
migrated scripts skips itself with the reason when torch is missing, and never fails to import.
The check runs pytest in a subprocess whose imports of the stack fail, as they would where it is
not installed (a finder refuses the names, and `importlib.util.find_spec` reports them absent, as
`tests/conftest.py` asks).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_WITHOUT_STACK = """
import importlib.abc, importlib.util, sys

STACK = ("torch", "transformers", "trl", "accelerate", "datasets", "peft", "diffusers")


def _stack(name):
    return name.partition(".")[0] in STACK


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if _stack(name):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
_find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, package=None: None if _stack(name) else _find_spec(name, package)
import pytest

raise SystemExit(pytest.main(sys.argv[1:]))
"""


def _pytest_without_stack(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    runner = tmp_path / "without_stack.py"
    runner.write_text(_WITHOUT_STACK)
    return subprocess.run(
        [sys.executable, str(runner), "-q", "-p", "no:xdist", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_every_module_of_tests_migrate_collects_without_torch(tmp_path: Path):
    result = _pytest_without_stack(tmp_path, "--collect-only", "tests/migrate")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "error" not in result.stdout.splitlines()[-1]
    assert "test_cluster_runs.py" in result.stdout  # skipped with its reason, not an import error
    assert "needs torch" in result.stdout


def test_the_rule_tests_run_without_torch(tmp_path: Path):
    result = _pytest_without_stack(tmp_path, "tests/migrate/test_rules.py")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
