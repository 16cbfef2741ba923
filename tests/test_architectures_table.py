"""docs/architectures.md is up to date for the CI subset: ``check`` on each gives that architecture's row.

The table is the bench's full run (39 min of checks); the suite checks its dozen architectures of ``CI_SUBSET``
(bench/bench_architectures.py: dense, MoE, sliding-window, hybrid and linear attention, state-space, multimodal
text backbones) on every run, so a regression in the simulator, the shim or ``check``, or a table left stale by a
change, fails here. Each half of the subset is checked in one worker process
(:func:`neuroncompat.check.check_many`): the process's start (imports, Dynamo's first compile) is most of a single
check's time. The checks run once per pytest worker (tests/ci_subset.py), for this module and tests/test_check.py.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from ci_subset import GROUPS, ROOT, bench, checked, group_types  # noqa: E402  (after the skip)

ROWS = bench.read_table((ROOT / "docs" / "architectures.md").read_text())


def test_the_ci_subset_is_a_dozen_architectures_that_pass_in_the_table():
    assert len(bench.CI_SUBSET) == 12
    assert {t: ROWS[t]["cells"] for t in bench.CI_SUBSET} == {t: ["ok"] * 4 for t in bench.CI_SUBSET}


@pytest.mark.slow  # a dozen architectures checked in two worker processes: the suite's longest job
@pytest.mark.xdist_group("ci_subset")
@pytest.mark.parametrize("group", range(GROUPS))
def test_each_architecture_of_the_ci_subset_checks_as_its_row_says(group):
    model_types = group_types(group)
    entries = list(checked(group).values())
    seen = {e["model_type"]: {k: bench.row(e)[k] for k in ("class", "cells", "failure")} for e in entries}
    in_table = {t: {k: ROWS[t][k] for k in ("class", "cells", "failure")} for t in model_types}
    assert seen == in_table, "docs/architectures.md is stale or an architecture regressed (rerun the bench: --only)"
    print(f"{len(model_types)} architectures: " + ", ".join(f"{e['model_type']} {e['seconds']} s" for e in entries))
