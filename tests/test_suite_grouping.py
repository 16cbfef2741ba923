"""The suite's ``xdist_group`` marks hold under ``pytest -n N``: a group's tests run in one worker.

Tests that read one expensive result (the CI subset's checks in tests/ci_subset.py, one launch read by several
tests) are grouped so that the worker holding the result runs them all. pytest-xdist applies a group only where the
worker itself sees ``--dist loadgroup`` and where pytest reads the id xdist suffixes with the group's name. Both
failed silently here: the option was set by a conftest hook only the controller ran (it is in pyproject's
``addopts`` now), and pytest 9.2 reads ids from a field xdist 3.8 does not set (pytest-dev/pytest-xdist#1386;
pytest is held below 9.2). Every group was spread over both workers and each worker computed the shared result
again: the CI subset's dozen checks ran three times instead of twice.
"""

from __future__ import annotations

import os

import pytest


@pytest.mark.xdist_group("suite_grouping")
def test_a_grouped_test_carries_its_group_in_its_worker(request: pytest.FixtureRequest) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("not under pytest -n: there are no workers to group tests in")
    if request.config.workerinput.get("neuroncompat_loadgroup") is False:  # type: ignore[attr-defined]
        pytest.skip("the run chose its own --dist mode, which keeps no groups")
    assert request.node.nodeid.endswith("@suite_grouping"), request.node.nodeid
