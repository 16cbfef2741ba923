"""A migration survives the user's linters (issue 45 item 3).

A repository that runs ruff, isort or black in pre-commit runs them right after
`neuron-migrate --write`. The shim import is never used by name, so pyflakes' F401 fix would delete
it, and a line out of isort's order would be moved; either way the next `neuron-migrate --check`
must still pass, or the two hooks undo each other forever. Each tool runs for real, with its
default settings (a repository with an empty `pyproject.toml`), alone and all four in the order a
pre-commit config lists them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.imports import SHIM_LINE

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = [
    ROOT / "examples" / "finetune_cuda.py",  # the README's example: stdlib, then torch/transformers
    ROOT / "fixtures" / "cuda" / "vllm_offline.py",  # no shimmed library at the top, a TODO above the import
    ROOT / "fixtures" / "optimum" / "pipeline_generation.py",  # `import torch` added by a rule
]
RUFF_CHECK = [sys.executable, "-m", "ruff", "check", "--isolated", "--fix", "--exit-zero", "--quiet"]
TOOLS = {
    "ruff-check": [RUFF_CHECK],
    # many repositories add the import-order rules to ruff's default set
    "ruff-check-isort-rules": [[*RUFF_CHECK, "--extend-select", "I"]],
    "ruff-format": [[sys.executable, "-m", "ruff", "format", "--isolated", "--quiet"]],
    "isort": [[sys.executable, "-m", "isort", "--quiet"]],
    "black": [[sys.executable, "-m", "black", "--quiet"]],
}
TOOLS["pre-commit-order"] = [command for commands in TOOLS.values() for command in commands]


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def linted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with one folder of migrated scripts per tool, each folder linted by its tool."""
    repo = tmp_path_factory.mktemp("repo")
    (repo / "pyproject.toml").write_text("")  # the project root: no tool looks above it for settings
    for tool in TOOLS:
        (repo / tool).mkdir()
        for script in SCRIPTS:
            shutil.copy(script, repo / tool / script.name)
    migrated = _run([sys.executable, "-m", "migrate", "--write", "-j", "1", "."], repo)
    assert migrated.returncode == 0, migrated.stderr
    for tool, commands in TOOLS.items():
        for command in commands:
            result = _run([*command, tool], repo)
            assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
    return repo


@pytest.mark.slow  # the module fixture runs each tool over the scripts: ~10 subprocesses
@pytest.mark.parametrize("tool", TOOLS)
def test_the_shim_import_survives(linted: Path, tool: str) -> None:
    for script in SCRIPTS:
        assert SHIM_LINE in (linted / tool / script.name).read_text(), f"{tool} removed or rewrote the shim import"


@pytest.mark.slow
def test_check_passes_on_the_linted_scripts(linted: Path) -> None:
    result = _run([sys.executable, "-m", "migrate", "--check", "-j", "1", "."], linted)
    assert result.returncode == 0, result.stdout + result.stderr


def test_isort_and_ruff_leave_the_shim_where_the_codemod_put_it(tmp_path: Path) -> None:
    """Sorted as isort sorts it: isort and ruff's I001 find nothing to move in an isort-clean script.

    At the example's own line length (120), where its long `from transformers import` fits on a line.
    """
    (tmp_path / "pyproject.toml").write_text("")
    script = tmp_path / "finetune_cuda.py"
    shutil.copy(SCRIPTS[0], script)
    assert _run([sys.executable, "-m", "migrate", "--write", script.name], tmp_path).returncode == 0
    isort = _run([sys.executable, "-m", "isort", "--check-only", "--diff", "-l", "120", script.name], tmp_path)
    assert isort.returncode == 0, isort.stdout
    ruff = _run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--isolated",
            "--select",
            "I,F401",
            "--line-length",
            "120",
            script.name,
        ],
        tmp_path,
    )
    assert ruff.returncode == 0, ruff.stdout
