"""Helpers of the codemod's topic tests: a snippet's migration (which must parse and be a fixed point), and a
migrated fixture run under torchrun on 1 and 2 simulated cores."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest

from migrate.dispatch import migrate_file
from migrate.options import Options

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cuda"


def migrate(src: str, name: str = "train.py") -> str:
    """The migrated text, which must parse and be a fixed point."""
    result = migrate_file(src.encode(), name, Options())
    assert result.error is None, result.error
    out = result.new.decode() if result.new is not None else src
    ast.parse(out)
    assert migrate_file(out.encode(), name, Options()).new is None, "a second run changed the output"
    return out


def migrate_with_todos(src: str, name: str = "train.py") -> tuple[str, list[str]]:
    """The migrated text (as :func:`migrate`) and the ids of its TODOs, in order."""
    out = migrate(src, name)
    return out, [line.split("NM", 1)[1][:3] for line in out.splitlines() if "TODO(neuron-migrate NM" in line]


def rank_lines(stdout: str, what: str) -> dict[int, list[str]]:
    """`rank N <what> ...` lines of each rank's own log, by rank."""
    found: dict[int, list[str]] = {}
    for rank, rest in re.findall(rf"^rank (\d+) {what} (.*)$", stdout, re.M):
        found.setdefault(int(rank), []).append(rest)
    return found


def run_on_cores(name: str, tmp_path: Path) -> None:
    """The fixture's migration under torchrun on 1 and 2 simulated cores: every rank trains with finite losses
    on its own core (the simulator shows a rank all cores, its own current)."""
    pytest.importorskip("torch", reason="runs the migrated script on the simulator: needs torch")
    from launch import torchrun

    for nproc in (1, 2):
        result = torchrun(FIXTURES / f"{name}.expected.py", ["--steps", "3"], tmp_path, nproc=nproc)
        steps = rank_lines(result.stdout, "step")
        assert sorted(steps) == list(range(nproc)), result.stdout[-3000:]
        for lines in steps.values():
            assert len(lines) == 3 and all(math.isfinite(float(line.split()[-1])) for line in lines)
        devices = {
            rank: lines[-1].split()[-1] for rank, lines in rank_lines(result.stdout, "(?:device|trained)").items()
        }
        assert devices == {rank: f"neuron:{rank}" for rank in range(nproc)}, result.stdout[-3000:]
