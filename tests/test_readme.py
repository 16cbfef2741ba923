"""Every ```python block in README.md runs as written, in a fresh interpreter, offline."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import REPO, run_python

BLOCKS = re.findall(r"^```python\n(.*?)^```$", (REPO / "README.md").read_text(encoding="utf-8"), re.M | re.S)


def test_the_readme_has_python_blocks() -> None:
    assert BLOCKS, "no ```python block found in README.md: the pattern or the README changed"


@pytest.mark.slow  # the simulator snippet loads a model and compiles it
@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(1, len(BLOCKS) + 1)])
def test_readme_python_block_runs_as_written(block: str, tmp_path: Path) -> None:
    result = run_python(block, cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, f"README block failed:\n{block}\n--- stderr ---\n{result.stderr[-3000:]}"
    assert result.stdout.strip(), "the block printed nothing"
