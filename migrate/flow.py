"""Data flow for NM301: which tensors flow *only* into `generate()`.

Inputs that only feed `generate()` should stay on CPU (transformers moves them per step), so
their `.to(device)` is dropped; a tensor also used in a forward pass or a loss keeps it. The
answer depends on uses that come after the assignment, so during the one traversal the
transformer records, per function (or module) scope, the candidate assignments and every use
of a name, classified as: inside `generate(...)` arguments, neutral (`.shape`, `.size()`,
`len()`), or anything else. When the scope is left, candidates whose name was used in
`generate()` and nowhere else (neutral uses aside) are rewritten in the already-rebuilt scope,
replacing exactly those nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst


@dataclass
class Candidate:
    """An assignment `name = <expr>` that a rule wants to change if `name` is generate-only."""

    name: str
    node: cst.CSTNode  # the updated node as placed in the rebuilt tree
    fix: Callable[[cst.CSTNode], cst.CSTNode]
    rule_ids: tuple[str, ...]


@dataclass
class Scope:
    uses: dict[str, list[int]] = field(default_factory=dict)  # name -> [generate, other]


class _Replace(cst.CSTTransformer):
    """Swap nodes by identity; used once per scope that has generate-only inputs."""

    def __init__(self, replacements: dict[int, cst.CSTNode]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        return self.replacements.get(id(original_node), updated_node)


class GenerateFlow:
    """Use counting per scope, driven by the transformer's visit/leave calls."""

    def __init__(self) -> None:
        self.scopes: list[Scope] = [Scope()]
        self.generate_args: set[int] = set()
        self.in_generate = 0
        self.neutral = 0
        self.target = 0

    def push_scope(self) -> None:
        self.scopes.append(Scope())

    def use(self, name: str) -> None:
        """Record one read of `name` in the innermost scope."""
        if self.target:
            return
        counts = self.scopes[-1].uses.setdefault(name, [0, 0])
        if self.in_generate:
            counts[0] += 1
        elif not self.neutral:
            counts[1] += 1

    def generate_only(self, name: str) -> bool:
        counts = self.scopes[-1].uses.get(name)
        return counts is not None and counts[0] > 0 and counts[1] == 0

    def pop_scope(self, node: cst.CSTNode, candidates: list[Candidate]) -> tuple[cst.CSTNode, list[Candidate]]:
        """Apply the fixes of generate-only candidates to `node`; return it and those applied."""
        applied = [c for c in candidates if self.generate_only(c.name)]
        self.scopes.pop()
        if not applied:
            return node, []
        replacements = {id(c.node): c.fix(c.node) for c in applied}
        result = node.visit(_Replace(replacements))
        assert isinstance(result, cst.CSTNode)  # the fixes replace assignments inside `node`, never `node` itself
        return result, applied
