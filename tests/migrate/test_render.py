"""A migrated file's kept statements are copied from its source, and the output is what libcst's render gives (#39).

`migrate.render` renders only the statements the rules changed; every other statement's text is its slice of the
source. The bar is byte-identical output: these tests show kept statements with odd layouts coming out exactly as
written beside rewritten ones, the layouts where the slices cannot be trusted rendered whole, and, for any choice of
kept statements, the render equal to the source it was parsed from.
"""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from migrate.cold_statements import statement_spans
from migrate.context import FileContext
from migrate.engine import migrate_source
from migrate.facts import FileFacts
from migrate.names import ImportMap
from migrate.registry import Selection
from migrate.render import render
from migrate.transform import MigrationTransformer

ROOT = Path(__file__).resolve().parents[2]

# statements no rule changes, in layouts libcst keeps as written, around two that the device rule rewrites
SOURCE = b"""import torch   # a comment after an import
\f
def kept(a,b):\t  # a tab, then spaces
    total = a + \\
        b
    return total ;
    # a comment at the end of the block
  # and one less indented

def train(model, batch):
    # above the rewritten statement
    out = model(batch.to("cuda"))  # cuda: rewritten
    unchanged = [1,
  2]
    return out
class Holder:
    size  =  3   ;  other = 4

    def odd( self ) :
        x = 1 \\

        return [x,
  2]
    # the class's last comment
# the file's last comment
"""


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_kept_statements_keep_their_bytes_beside_rewritten_ones(newline: bytes):
    source = SOURCE.replace(b"\n", newline)
    result = migrate_source(source, "train.py")
    assert result.status == "changed"
    assert result.new == source.replace(b'.to("cuda")', b'.to("neuron")')
    assert [rewrite.line for rewrite in result.rewrites] == [12]


@pytest.mark.parametrize(
    "source",
    [
        # a line that is only a continuation: libcst does not keep it; the whole file is rendered, as before
        b'import torch\nx = 1\n\\\ny = 2\nz = torch.device("cuda")\n',
        # a decorator CPython places below its `@`
        b'import torch\n@(\n  staticmethod\n)\ndef f(): pass\nz = torch.device("cuda")\nw = 1\n',
        # no line break at the end of the file
        b'import torch\nz = torch.device("cuda")\nw = 1',
        # a lone carriage return: a line break to CPython only
        b'import torch\nx = "a"; y = 1\rz = torch.device("cuda")\nw = 1\n',
    ],
    ids=["continuation-line", "decorator-below-its-at", "no-final-newline", "lone-cr"],
)
def test_layouts_whose_statements_cannot_be_located_come_out_as_libcst_renders_them(source: bytes):
    result = migrate_source(source, "train.py")
    assert result.status == "changed" and result.new is not None
    assert result.new == cst.parse_module(source).code.replace('"cuda"', '"neuron"').encode()


class _Keep(cst.CSTTransformer):
    """Rebuilds every node, but hands back the parsed node for every `every`-th statement (counted from `first`):
    a migrated tree with those statements kept and the rest changed."""

    def __init__(self, every: int, first: int) -> None:
        super().__init__()
        self.every, self.count = every, every - first

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:
        if isinstance(original_node, cst.BaseStatement):
            self.count += 1
            if self.count % self.every == 0:
                return original_node
        return updated_node


def _renders_as_parsed(data: bytes) -> None:
    """For several choices of kept statements (all, none, every other, every third), the render is the source."""
    module = cst.parse_module(data)
    text = data.decode(module.encoding)
    spans = statement_spans(ast.parse(data).body)
    for every, first in ((1, 0), (2, 0), (2, 1), (3, 1)):
        assert render(module.visit(_Keep(every, first)), module, spans, text) == text, (every, first)
    assert render(module.visit(cst.CSTTransformer()), module, spans, text) == text


_EVERY_KIND = (ROOT / "tests" / "migrate" / "test_statement_lines.py").read_text().split('_ODD = b"""\\\n')[1]
_EVERY_KIND = _EVERY_KIND.split('"""')[0]


@pytest.mark.parametrize(
    "data", [SOURCE, SOURCE.replace(b"\n", b"\r\n"), _EVERY_KIND.encode()], ids=["odd", "crlf", "every-kind"]
)
def test_any_choice_of_kept_statements_renders_as_parsed(data: bytes):
    _renders_as_parsed(data)


@pytest.mark.slow
def test_every_fixture_and_source_renders_as_parsed_with_any_statements_kept():
    paths = sorted(p for folder in ("fixtures", "examples", "migrate") for p in (ROOT / folder).rglob("*.py"))
    assert len(paths) > 100
    for path in paths:
        data = path.read_bytes()
        if data.count(b"\r") == data.count(b"\r\n"):  # the engine renders files with a lone carriage return whole
            _renders_as_parsed(data)


def test_a_statement_no_rule_changed_comes_back_as_the_parsed_node():
    # what lets the render copy it: the traversal visits `train`'s body (it holds a token) and rebuilds it
    module = cst.parse_module(SOURCE)
    ctx = FileContext(imports=ImportMap(), facts=FileFacts.from_text(SOURCE.decode()), selection=Selection())
    new = module.visit(MigrationTransformer(ctx, track_generate=False, families=("device",)))
    train = module.body[2]
    new_train = new.body[2]
    assert new_train is not train  # `batch.to("cuda")` changed
    kept = [a is b for a, b in zip(new_train.body.body, train.body.body, strict=True)]
    assert kept == [False, True, True]
    assert new.body[0] is module.body[0] and new.body[3] is module.body[3]
