"""Every ```python block in README.md and the tools' pages under docs/ runs as written, in a fresh interpreter, offline.

The README is the landing page and each tool's manual is its own page (docs/shim.md, docs/simulator.md, ...): a
snippet a user copies from either must run. docs/rules.md is left out: its blocks are before/after fragments of
user scripts, checked by the codemod's own fixtures.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import REPO, run_python

PAGES = ["README.md", *(f"docs/{name}.md" for name in ("install", "shim", "migrate", "simulate", "check", "simulator"))]
BLOCKS = [
    (page, block)
    for page in PAGES
    for block in re.findall(r"^```python\n(.*?)^```$", (REPO / page).read_text(encoding="utf-8"), re.M | re.S)
]


def test_the_pages_have_python_blocks() -> None:
    assert {page for page, _ in BLOCKS} >= {"README.md", "docs/simulator.md"}, "a ```python block went missing"


@pytest.mark.slow  # the simulator snippet loads a model and compiles it
@pytest.mark.parametrize("page, block", BLOCKS, ids=[f"{page}-{i}" for i, (page, _) in enumerate(BLOCKS, 1)])
def test_python_block_runs_as_written(page: str, block: str, tmp_path: Path) -> None:
    result = run_python(block, cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, f"{page} block failed:\n{block}\n--- stderr ---\n{result.stderr[-3000:]}"
    assert result.stdout.strip(), f"the {page} block printed nothing"
