"""docs/architectures.md is up to date for the CI subset: ``check`` on each gives that architecture's row.

The table is the bench's full run (39 min of checks); the suite checks its dozen architectures of ``CI_SUBSET``
(bench/bench_architectures.py: dense, MoE, sliding-window, hybrid and linear attention, state-space, multimodal
text backbones) on every run, so a regression in the simulator, the shim or ``check``, or a table left stale by a
change, fails here. Each half of the subset is checked in one worker process
(:func:`neuroncompat.check.check_many`): the process's start (imports, Dynamo's first compile) is most of a single
check's time, and the halves run on the two xdist workers side by side.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
GROUPS = 2


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_architectures", ROOT / "bench" / "bench_architectures.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _bench()
ROWS = bench.read_table((ROOT / "docs" / "architectures.md").read_text())


def _group(number: int) -> list[str]:
    """Every GROUPS-th architecture of the subset: its order balances the groups (bench_architectures.CI_SUBSET)."""
    return list(bench.CI_SUBSET)[number::GROUPS]


def test_the_ci_subset_is_a_dozen_architectures_that_pass_in_the_table():
    assert len(bench.CI_SUBSET) == 12
    assert {t: ROWS[t]["cells"] for t in bench.CI_SUBSET} == {t: ["ok"] * 4 for t in bench.CI_SUBSET}


@pytest.mark.parametrize("group", range(GROUPS))
def test_each_architecture_of_the_ci_subset_checks_as_its_row_says(group):
    model_types = _group(group)
    start = time.perf_counter()
    entries = bench.check_group(model_types, bench.architectures(), timeout=300)
    took = time.perf_counter() - start
    seen = {e["model_type"]: {k: bench.row(e)[k] for k in ("class", "cells", "failure")} for e in entries}
    in_table = {t: {k: ROWS[t][k] for k in ("class", "cells", "failure")} for t in model_types}
    assert seen == in_table, "docs/architectures.md is stale or an architecture regressed (rerun the bench: --only)"
    print(
        f"{len(model_types)} architectures in {took:.1f} s: "
        + ", ".join(f"{e['model_type']} {e['seconds']} s" for e in entries)
    )
