"""Every ``neuron-migrate`` rule id the CUDA redirect can log exists in the codemod.

The log ends with ``neuron-migrate --select <rules> --write <files>``: a retired or misspelt id
there would make that command fail (unknown rule) or silently skip the site. The ids are read
from the redirect's source, so a new mapping with a dead id fails here without running it; the
in-process cases (``tests/isolated/redirect_cases.py``) check the ids actually logged.
"""

from __future__ import annotations

import re
from pathlib import Path

import neuroncompat.cuda
from migrate.rule_families import get_rule

SOURCES = sorted(Path(neuroncompat.cuda.__file__).parent.glob("*.py"))


def test_rule_ids_in_the_redirect_are_live_migrate_rules() -> None:
    found = {(path.name, rule) for path in SOURCES for rule in re.findall(r"\bNM\d{3}\b", path.read_text())}
    assert {rule for _, rule in found} >= {"NM101", "NM102", "NM104", "NM204", "NM205", "NM401"}
    dead = sorted(f"{name}: {rule}" for name, rule in found if get_rule(rule) is None)
    assert not dead, f"retired or unknown neuron-migrate rules in the CUDA redirect: {dead}"
