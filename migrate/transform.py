"""The one traversal: a libcst transformer that runs, on each node it leaves, the rule hooks for that node's type.

Besides dispatching to the rule hooks (those of the families the file needs, `migrate.rule_families.hooks_for`,
in family order, looked up once per node by its class) it owns the cross-cutting mechanics: import tracking for name resolution, statement frames
(so `# neuron-migrate: skip` can discard a statement's rewrites, `skip[NMxxx]` can switch rules off inside it,
and TODO comments can be attached above it), and the use counting behind the generate-only data flow.
"""

from __future__ import annotations

from functools import cache

import libcst as cst
import libcst._nodes.op as cst_op

from migrate.context import FileContext, Frame
from migrate.markers import RULE_SKIP_MARKER, SKIP_MARKER, TODO_PREFIX, find_skip
from migrate.rule_families import hooks_for
from migrate.rules.base import Hook, HookResult, method_of

# Exact-type sets: libcst node classes are ABCs, and `isinstance` against ABCs dominated the
# profile of the traversal; concrete libcst node types are never subclassed.
_STATEMENTS = frozenset(
    {
        cst.SimpleStatementLine,
        cst.If,
        cst.For,
        cst.While,
        cst.With,
        cst.Try,
        cst.TryStar,
        cst.FunctionDef,
        cst.ClassDef,
        cst.Match,
    }
)


# Nodes whose subtrees hold nothing the traversal acts on: operators, brackets, names and literals, and the
# whitespace and comments around them. No hook is for such a node (`_dispatch_table` checks), none is below
# one, and `on_visit` tracks them only at the node itself (a `Name` use), so their children are not visited:
# libcst would otherwise rebuild each of these nodes (more than half of a tree) just to hand back an equal one.
# The one thing inside is a comment, which matters only as a `# neuron-migrate: skip` marker, so in a file
# with a marker only the nodes with no children at all are passed over.
_CHILDLESS = frozenset({cst.SimpleWhitespace, cst.Newline, cst.Comment})
_INERT = _CHILDLESS | frozenset(
    {
        *(
            node_class
            for node_class in vars(cst_op).values()
            if isinstance(node_class, type)
            and issubclass(node_class, cst.CSTNode)
            and node_class.__module__ == cst_op.__name__
        ),
        cst.EmptyLine,
        cst.TrailingWhitespace,
        cst.ParenthesizedWhitespace,
        cst.LeftParen,
        cst.RightParen,
        cst.LeftSquareBracket,
        cst.RightSquareBracket,
        cst.LeftCurlyBrace,
        cst.RightCurlyBrace,
        cst.Name,
        cst.Integer,
        cst.Float,
        cst.Imaginary,
        cst.SimpleString,
        cst.Ellipsis,
        cst.Asynchronous,
    }
)


@cache
def dispatch_table(families: tuple[str, ...]) -> dict[type[cst.CSTNode], tuple[Hook, ...]]:
    """libcst node class -> the hooks of `families` for leaving such nodes, in family order: one lookup per node left.

    A hook for a name libcst has no node class for would never run: that is a typo in `@on(...)`.
    """
    table: dict[type[cst.CSTNode], tuple[Hook, ...]] = {}
    for name, hooks in hooks_for(families).items():
        node_class = getattr(cst, name, None)
        if not (isinstance(node_class, type) and issubclass(node_class, cst.CSTNode)):
            raise ValueError(f"@on({name!r}): libcst has no node class {name}")
        if node_class in _INERT:
            raise ValueError(f"@on({name!r}): the traversal does not visit inside {name} nodes (transform._INERT)")
        table[node_class] = hooks
    return table


class MigrationTransformer(cst.CSTTransformer):
    """Applies the hooks of the file's families in a single pass over one module."""

    def __init__(
        self, ctx: FileContext, track_generate: bool, families: tuple[str, ...], cold: frozenset[int] = frozenset()
    ) -> None:
        super().__init__()
        self.ctx = ctx
        # ids of statements no hook of the families can change (`migrate.cold_statements`): their frame is opened
        # and closed and their own hooks run, but nothing inside them is visited, so they stay as parsed
        self.cold = cold
        self.dispatch = dispatch_table(families)
        self.track_generate = track_generate
        self.elifs: set[int] = set()
        self.todos_added = 0
        # How many times a hook returned another node than it was given (or a scope's fix or a TODO applied): while
        # 0, the visited module renders to exactly the parsed bytes (libcst round-trips), so the engine need not
        # render it. A statement during whose visit it did not move is handed back as the parsed node (`marks`: its
        # value when each open statement was entered), so the render copies its text (`migrate.render`).
        self.changes = 0
        self.marks: list[int] = []
        self.not_variables: set[int] = set()  # ids of Name nodes that are attributes/keywords
        # A comment above the first statement parses as part of the module header, so a
        # TODO put there by an earlier run is found in the header on the next run.
        self.first_statement: int | None = None
        self.header_tags: set[str] = set()
        # `skip[NMxxx]` markers must be known before the statement's hooks run (a trailing comment is
        # visited after the calls on its line), so statements are scanned for them on entry, only in
        # files that have one.
        self.rule_skips = RULE_SKIP_MARKER in ctx.text
        self.inert = _INERT if SKIP_MARKER not in ctx.text else _CHILDLESS  # nodes whose children are not visited

    @property
    def rewrote(self) -> bool:
        """Whether any node was replaced: if not, the visited module renders exactly as parsed."""
        return self.changes > 0

    def visit_Module(self, node: cst.Module) -> bool:
        if node.body:
            self.first_statement = id(node.body[0])
        self.header_tags = {_tag(line.comment.value) for line in node.header if line.comment is not None}
        return True

    # ---- visiting ----------------------------------------------------------------------

    def on_visit(self, node: cst.CSTNode) -> bool:
        ctx = self.ctx
        kind = type(node)
        if kind in _STATEMENTS:
            frame = Frame(statement=node)
            ctx.frames.append(frame)
            self.marks.append(self.changes)
            if self.rule_skips:
                frame.skip_rules = _listed_skips(node)
                ctx.skipping += bool(frame.skip_rules)
            if kind is cst.If and type(node.orelse) is cst.If:  # type: ignore[attr-defined]
                self.elifs.add(id(node.orelse))  # type: ignore[attr-defined]
            if kind is cst.FunctionDef and self.track_generate:
                ctx.flow.push_scope()
            return id(node) not in self.cold
        elif kind is cst.Import:
            ctx.imports.add_import(node)  # type: ignore[arg-type]
        elif kind is cst.ImportFrom:
            ctx.imports.add_import_from(node)  # type: ignore[arg-type]
        elif kind is cst.Module:
            self.visit_Module(node)  # type: ignore[arg-type]
        elif kind is cst.Comment:
            skip = find_skip(node.value)  # type: ignore[attr-defined]
            if skip is not None and skip.everything:
                ctx.frames[-1].skip = True
        elif self.track_generate:
            self._visit_flow(node)
        return kind not in self.inert

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        """Only `AnnAssign.target` needs attribute-level hooks; skip libcst's generic lookup."""
        if attribute == "target" and self.track_generate and type(node) is cst.AnnAssign:
            self.ctx.flow.target += 1

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        if attribute == "target" and self.track_generate and type(original_node) is cst.AnnAssign:
            self.ctx.flow.target -= 1

    def _visit_flow(self, node: cst.CSTNode) -> None:
        flow = self.ctx.flow
        if type(node) is cst.Name:
            if id(node) not in self.not_variables:
                flow.use(node.value)
        elif type(node) is cst.Attribute:
            self.not_variables.add(id(node.attr))  # `x.input_ids`: `input_ids` is no variable
            if node.attr.value == "shape":
                flow.neutral += 1
        elif type(node) is cst.Call:
            if method_of(node, "generate"):
                flow.generate_args.update(id(a) for a in node.args)
            elif type(node.func) is cst.Name and node.func.value == "len":
                flow.neutral += 1
            elif method_of(node, "size"):
                flow.neutral += 1
        elif type(node) is cst.Arg:
            if node.keyword is not None:
                self.not_variables.add(id(node.keyword))
            if id(node) in flow.generate_args:
                flow.in_generate += 1
        elif type(node) is cst.AssignTarget:
            flow.target += 1

    def _leave_flow(self, node: cst.CSTNode) -> None:
        flow = self.ctx.flow
        if type(node) is cst.Call:
            if type(node.func) is cst.Name and node.func.value == "len" or method_of(node, "size"):
                flow.neutral -= 1
        elif type(node) is cst.Arg and id(node) in flow.generate_args:
            flow.in_generate -= 1
        elif type(node) is cst.Attribute and node.attr.value == "shape":
            flow.neutral -= 1
        elif type(node) is cst.AssignTarget:
            flow.target -= 1

    # ---- leaving -----------------------------------------------------------------------

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        kind = type(original_node)
        hooks = self.dispatch.get(kind)
        statement = kind in _STATEMENTS
        if not statement:
            if self.track_generate:
                self._leave_flow(original_node)
            if hooks is None:  # most nodes (whitespace, names, operators): nothing to run
                return updated_node
        ctx = self.ctx
        result: HookResult = updated_node
        if hooks:
            if kind is cst.If:  # an `elif` clause must stay an `If`: hooks that replace an `if` ask
                ctx.elif_clause = id(original_node) in self.elifs
            node_type = kind  # `updated_node` is `original_node` with its children visited: the same class
            node: cst.CSTNode = updated_node
            for hook in hooks:
                result = hook(node, ctx)
                if result is not node:
                    self.changes += 1
                    if not isinstance(result, cst.CSTNode) or type(result) is not node_type:
                        break
                    node = result
            if ctx.pending:
                # Candidates come from `Assign` hooks, which return an `Assign`: never a sentinel.
                assert isinstance(result, cst.CSTNode)
                for candidate in ctx.pending:
                    candidate.node = result
                ctx.frames[-1].candidates.extend(ctx.pending)
                ctx.pending.clear()
        if statement:
            if kind is cst.FunctionDef and self.track_generate and isinstance(result, cst.CSTNode):
                result = self._close_scope(result)
            return self._close_frame(original_node, result)
        return result

    def _close_scope(self, node: cst.CSTNode) -> cst.CSTNode:
        frame = self.ctx.frames[-1]
        new, applied = self.ctx.flow.pop_scope(node, frame.candidates)
        self.changes += new is not node
        for candidate in applied:
            for rule_id in candidate.rule_ids:
                frame.hits[rule_id] += 1
        frame.candidates = []
        return new

    def close_module(self, module: cst.Module) -> cst.Module:
        """Resolve the module scope's generate-only candidates (the root frame's)."""
        if not self.track_generate:
            return module
        frame = self.ctx.frames[0]
        node, applied = self.ctx.flow.pop_scope(module, frame.candidates)
        self.changes += node is not module
        for candidate in applied:
            for rule_id in candidate.rule_ids:
                frame.hits[rule_id] += 1
        return node  # type: ignore[return-value]

    def _close_frame(self, original: cst.CSTNode, updated: HookResult) -> HookResult:
        ctx = self.ctx
        frame = ctx.frames.pop()
        mark = self.marks.pop()
        ctx.skipping -= bool(frame.skip_rules)
        parent = ctx.frames[-1]
        if frame.skip:
            return original
        if frame.todos and id(original) in self.elifs:
            parent.todos.extend(t for t in frame.todos if t not in parent.todos)
            frame.todos = []
        if frame.todos:
            if isinstance(updated, cst.RemovalSentinel | cst.FlattenSentinel):
                parent.todos.extend(t for t in frame.todos if t not in parent.todos)
            else:
                present = self.header_tags if id(original) == self.first_statement else set()
                updated, added = _attach_todos(updated, frame.todos, present)
                self.todos_added += added
                self.changes += added
        parent.merge(frame)
        if self.changes == mark and not frame.candidates:
            # nothing inside changed (and no generate-flow fix will look for its rebuilt nodes): the parsed node
            return original
        return updated


def _listed_skips(statement: cst.CSTNode) -> tuple[str, ...]:
    """The rule ids/prefixes of the `skip[...]` markers in a statement's own comments.

    Its own: the lines above it, its trailing comment and, for a compound statement, its header
    line; comments of nested statements belong to those (as a plain skip does).
    """
    found: list[str] = []
    stack = list(statement.children)
    while stack:
        node = stack.pop()
        if type(node) is cst.Comment:
            skip = find_skip(node.value)
            if skip is not None:
                found.extend(skip.prefixes)
        elif type(node) not in _STATEMENTS:
            stack.extend(node.children)
    return tuple(found)


def _tag(comment: str) -> str:
    return comment.split(")")[0]


def _attach_todos(node: cst.CSTNode, todos: list[tuple[str, str]], header: set[str]) -> tuple[cst.CSTNode, int]:
    """Put `# TODO(neuron-migrate NM9xx): ...` lines above the statement, once per rule id."""
    leading = list(getattr(node, "leading_lines", ()))
    present = {_tag(line.comment.value) for line in leading if line.comment is not None} | header
    added = []
    for rule_id, message in todos:
        tag = f"{TODO_PREFIX}{rule_id}"
        if tag in present:
            continue
        present.add(tag)
        added.append(cst.EmptyLine(comment=cst.Comment(f"{tag}): {message}")))
    if not added:
        return node, 0
    return node.with_changes(leading_lines=[*leading, *added]), len(added)
