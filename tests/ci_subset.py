"""The CI subset of docs/architectures.md (bench/bench_architectures.py:CI_SUBSET), checked once per pytest worker.

``tests/test_architectures_table.py`` compares each half of the subset with its rows; ``tests/test_check.py`` reads
the reports of the architectures it asserts more about (Gemma 3's decode recompiles, the MoE's grouped experts).
A check of a dozen architectures is the suite's longest job, so each half runs once, in one worker process
(:func:`neuroncompat.check.check_many`), and every test that reads it is in the ``ci_subset`` xdist group
(``--dist loadgroup``): they run in the pytest worker that holds the result.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GROUPS = 2


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_architectures", ROOT / "bench" / "bench_architectures.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _bench()


def group_types(number: int) -> list[str]:
    """Every GROUPS-th architecture of the subset: its order balances the groups (bench_architectures.CI_SUBSET)."""
    return list(bench.CI_SUBSET)[number::GROUPS]


@functools.cache
def checked(number: int) -> dict[str, dict[str, Any]]:
    """Group ``number`` checked in one worker process: the bench's entry (row fields and ``report``) by model type."""
    # A hang guard, not a speed bound: the group takes about 50 s on an idle 2-core machine and went past 300 s
    # (and failed) at load average 6-10 with other jobs beside the suite.
    entries = bench.check_group(group_types(number), bench.architectures(), timeout=1200)
    return {entry["model_type"]: entry for entry in entries}


def report(model_type: str) -> dict[str, Any]:
    """``neuroncompat check --format json``'s report for one architecture of the subset (its default config)."""
    [number] = [n for n in range(GROUPS) if model_type in group_types(n)]
    entry = checked(number)[model_type]
    assert "report" in entry, f"{model_type} was not checked: {entry.get('error')}\n{entry.get('detail', '')}"
    return entry["report"]
