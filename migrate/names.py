"""Resolve expressions to dotted names through the file's own imports.

Why not libcst's `QualifiedNameProvider`: it needs a full `ScopeProvider` pass, which measured
6.5x the cost of libcst's own parse+render on transformers model files, on its own more than
the codemod's whole budget (3x the floor for files that need rewriting, see
`bench/bench_migrate.py`). Scripts bind the modules we care about (`torch`, `torch.cuda`,
`transformers`, `peft`, `trl`, ...) with import statements, and those are seen in source order
by the same traversal that rewrites, before the code that uses them. So the transformer feeds
every `import`/`from ... import` it visits into an `ImportMap`, and resolves names against it.

Known limit (documented in docs/rules.md): rebinding an imported name by plain assignment
(`torch = something_else`) is not tracked.
"""

from __future__ import annotations

import libcst as cst


def dotted(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None (calls, subscripts, ...)."""
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _module_name(node: cst.BaseExpression | None) -> str:
    return dotted(node) or "" if node is not None else ""


class ImportMap:
    """Local name -> qualified name, filled in as import statements are visited."""

    def __init__(self) -> None:
        self._alias: dict[str, str] = {}
        # The last node qualified and its answer: the twenty `Call` hooks each ask about the same `node.func` in
        # turn. Holding the node keeps its id from being reused; an import seen in between forgets the answer.
        self._last: tuple[cst.BaseExpression | None, str | None] = (None, None)
        # Local names bound by `from ... import`: one helper imported for its uses, where `import pkg` may be
        # there for the package's side effects (what `migrate.rules.removal` retires with a removed use)
        self.from_imported: set[str] = set()

    def add_import(self, node: cst.Import) -> None:
        """`import a.b` binds `a`; `import a.b as c` binds `c` to `a.b`."""
        self._last = (None, None)
        for alias in node.names:
            full = _module_name(alias.name)
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                self._alias[alias.asname.name.value] = full
            else:
                head = full.split(".")[0]
                self._alias[head] = head

    def add_import_from(self, node: cst.ImportFrom) -> None:
        """`from a.b import c as d` binds `d` to `a.b.c`; relative imports are ignored."""
        self._last = (None, None)
        if node.relative or isinstance(node.names, cst.ImportStar):
            return
        mod = _module_name(node.module)
        for alias in node.names:
            name = _module_name(alias.name)
            local = name
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                local = alias.asname.name.value
            self._alias[local] = f"{mod}.{name}"
            self.from_imported.add(local)

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """The qualified name of a Name/Attribute chain, or None when its head is not imported."""
        last, answer = self._last
        if node is last:
            return answer
        name = dotted(node)
        if name is None:
            answer = None
        else:
            head, _, rest = name.partition(".")
            target = self._alias.get(head)
            answer = None if target is None else f"{target}.{rest}" if rest else target
        self._last = (node, answer)
        return answer

    def local_name_for(self, module: str) -> str | None:
        """The local name bound to exactly `module` (`T` after `import torch as T`), if any."""
        for local, target in self._alias.items():
            if target == module:
                return local
        return None
