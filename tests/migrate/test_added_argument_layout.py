"""An argument a rule adds follows the call's own layout (`rules.base.add_kwarg`), as a reviewer would write it.

Found running `neuron-migrate` on PEFT's and accelerate's example scripts: NM305 appended `drop_last=True`
after the newline that stood before a closing paren on its own line, leaving `batch_size=8, ` with trailing
whitespace and `drop_last=True)` at column 0.
"""

from __future__ import annotations

import ast

from migrate.engine import migrate_source
from migrate.options import Options

HEAD = "from torch.utils.data import DataLoader\n\nds = list(range(10))\n"


def run(body: str) -> str:
    result = migrate_source((HEAD + body).encode(), "train.py", Options(shim=False))
    assert result.error is None, result.error
    out = (result.new.decode() if result.new else HEAD + body)[len(HEAD) :]
    ast.parse(out)
    return out


def test_arguments_on_one_line_before_a_paren_on_its_own_line():
    out = run("loader = DataLoader(\n    ds, shuffle=True, batch_size=8\n)\n")
    assert out == "loader = DataLoader(\n    ds, shuffle=True, batch_size=8, drop_last=True\n)\n"


def test_one_argument_per_line_without_a_trailing_comma():
    out = run("loader = DataLoader(\n    ds,\n    shuffle=True,\n    batch_size=8\n)\n")
    assert out == "loader = DataLoader(\n    ds,\n    shuffle=True,\n    batch_size=8,\n    drop_last=True\n)\n"


def test_one_argument_per_line_with_a_trailing_comma():
    out = run("loader = DataLoader(\n    ds,\n    shuffle=True,\n    batch_size=8,\n)\n")
    assert out == "loader = DataLoader(\n    ds,\n    shuffle=True,\n    batch_size=8,\n    drop_last=True,\n)\n"


def test_a_one_line_call():
    assert run("loader = DataLoader(ds, shuffle=True, batch_size=8)\n") == (
        "loader = DataLoader(ds, shuffle=True, batch_size=8, drop_last=True)\n"
    )


def test_no_line_ends_in_whitespace():
    out = run("loader = DataLoader(\n    ds, shuffle=True,\n    batch_size=8\n)\n")
    assert not any(line != line.rstrip() for line in out.splitlines()), out
