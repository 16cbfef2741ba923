"""Fixtures shared by the end-to-end runs of migrated fixtures (CUDA and Optimum Neuron sets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_runs import build_workdir


@pytest.fixture(scope="session")
def run_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny memorised Llama and its training data for every run test (building it takes seconds)."""
    return build_workdir(tmp_path_factory.mktemp("runs"))
