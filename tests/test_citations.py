"""Every citation in the project opens for a user of the package or a new contributor (CONTRIBUTING: code cites
docs/gaps.md and docs/rules.md, never notes kept outside the repository).

The project's research notes live outside it, in a folder named research that no checkout or wheel has, so a
docstring, doc or test that cites one (the diffusers note's section 6, as `neuroncompat/tiny_pipelines.py` did)
points at nothing; what the project needs of a note belongs in its own docs. This reads every text file of the
tree, code, docs and tests alike.
"""

from __future__ import annotations

import re
from pathlib import Path

from helpers import REPO

# A path that starts at the notes folder (`<folder>/x.md`), not one inside a URL or a longer path.
_OUTSIDE_NOTE = re.compile(r"(?<![\w./-])" + "research" + r"/[\w./-]*")
_TEXT = {".py", ".md", ".toml", ".sh", ".cfg", ".txt", ".yaml", ".yml", ".ipynb"}
# fixtures/ are golden scripts written as their authors would; build output and caches are not the project's
_SKIPPED = {"fixtures", "__pycache__", "build", "dist"}


def outside_citations(root: Path) -> list[str]:
    """`path:line: cited` for each citation of a note outside the project in the text files under `root`."""
    found = []
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if (
            path.suffix not in _TEXT
            or not path.is_file()
            or any(p in _SKIPPED or p.endswith(".egg-info") for p in parts)
        ):
            continue
        if any(p.startswith(".") and p != ".ci" for p in parts):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for cited in _OUTSIDE_NOTE.findall(line):
                found.append(f"{path.relative_to(root).as_posix()}:{number}: {cited}")
    return found


def test_nothing_in_the_tree_cites_a_note_outside_the_project() -> None:
    assert outside_citations(REPO) == [], "move what the note says into docs/ and cite that"


def test_a_docstring_citing_a_note_outside_the_project_is_found(tmp_path: Path) -> None:
    module = tmp_path / "neuroncompat" / "tiny.py"
    module.parent.mkdir()
    module.write_text('"""Tiny pipelines.\n\n``' + "research" + '/diffusers_kernels_neuron.md`` section 6."""\n')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("See https://example.org/research/notes.md and docs/gaps.md.\n")
    assert outside_citations(tmp_path) == ["neuroncompat/tiny.py:3: " + "research" + "/diffusers_kernels_neuron.md"]
