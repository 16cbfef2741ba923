"""Per-file state shared by the rules during the one rewriting traversal."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from migrate.facts import FileFacts
from migrate.flow import Candidate, GenerateFlow
from migrate.names import ImportMap
from migrate.registry import Selection


@dataclass
class Frame:
    """What happened inside one statement; merged into its parent unless the line says skip."""

    hits: Counter[str] = field(default_factory=Counter)
    # the original statement node, and the rewrites made in it (rule id, statement) and in its nested statements:
    # where each rewrite is, for the reports that show it at its line (`migrate.engine` resolves the lines)
    statement: cst.CSTNode | None = None
    sites: list[tuple[str, cst.CSTNode]] = field(default_factory=list)
    nested_hits: Counter[str] = field(default_factory=Counter)
    todos: list[tuple[str, str]] = field(default_factory=list)  # (rule id, message)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    skip: bool = False  # a plain `# neuron-migrate: skip`: the statement is kept as it was
    skip_rules: tuple[str, ...] = ()  # `skip[NM305,NM2]`: these ids/prefixes are off inside the statement

    def merge(self, child: Frame) -> None:
        if child.statement is not None:  # a rule may take a hit back (`hits[id] -= 1`): count what is left
            child.sites.extend((rule_id, child.statement) for rule_id in (child.hits - child.nested_hits).elements())
        self.hits.update(child.hits)
        self.nested_hits.update(child.hits)
        self.sites.extend(child.sites)
        self.warnings.extend(child.warnings)
        self.candidates.extend(child.candidates)


@dataclass
class FileContext:
    """The rules' view of the file being migrated.

    Rules call `hit` when they rewrite, `todo` to annotate the enclosing statement and `warn`
    for report-only notes; all three land in the innermost open statement frame so that a
    `# neuron-migrate: skip` comment can discard them together with the rewrite. Rules ask
    `enabled(id)` before rewriting, which answers for `--select/--ignore` and for the
    `# neuron-migrate: skip[NMxxx]` markers of the statements being visited alike.
    """

    imports: ImportMap
    facts: FileFacts
    selection: Selection
    frames: list[Frame] = field(default_factory=lambda: [Frame()])
    needed_imports: set[str] = field(default_factory=set)  # top-level modules to import
    needed_names: dict[str, list[str]] = field(default_factory=dict)  # module -> names to import from it
    vllm_engines: set[str] = field(default_factory=set)  # names bound to vllm.LLM(...)
    flow: GenerateFlow = field(default_factory=GenerateFlow)
    pending: list[Candidate] = field(default_factory=list)  # bound to their node by the transformer
    callee: str | None = None  # set while call keywords are rewritten: the called name
    elif_clause: bool = False  # set while the hooks of an `If` run: whether it is an `elif` clause
    text: str = ""  # the decoded source, for whole-file facts a rule needs (e.g. `pad_token`)
    family_state: dict[str, Any] = field(default_factory=dict)  # per-file state a family keeps across hooks
    neuron_kernels: dict[str, str] = field(default_factory=dict)  # layer -> Neuron kernel repo (NM212's option)

    skipping: int = 0  # open frames with `skip_rules`: while 0, `enabled` is the selection alone
    # rules of families loaded in the process but off for this file (`migrate.rule_families.rules_off`): the
    # settings such a family registered must not act in a file whose tokens did not switch it on
    off_rules: frozenset[str] = frozenset()

    def enabled(self, rule_id: str) -> bool:
        """Whether the rule is selected, its family is on for the file and no enclosing statement's `skip[...]`
        marker names it."""
        if not self.selection.enabled(rule_id) or rule_id in self.off_rules:
            return False
        return not self.skipping or not any(rule_id.startswith(f.skip_rules) for f in self.frames if f.skip_rules)

    def hit(self, rule_id: str) -> None:
        self.frames[-1].hits[rule_id] += 1

    def todo(self, rule_id: str, message: str) -> None:
        frame = self.frames[-1]
        if (rule_id, message) not in frame.todos:
            frame.todos.append((rule_id, message))

    def warn(self, rule_id: str, message: str) -> None:
        self.frames[-1].warnings.append((rule_id, message))

    def candidate(self, name: str, fix, rule_ids: tuple[str, ...]) -> None:
        """Ask for `fix` on the current assignment if `name` turns out to be generate-only."""
        self.pending.append(Candidate(name=name, node=None, fix=fix, rule_ids=rule_ids))  # type: ignore[arg-type]

    def qualify(self, node: cst.BaseExpression) -> str | None:
        return self.imports.qualify(node)

    def module_ref(self, module: str) -> cst.BaseExpression:
        """An expression naming `module` (`torch`, `torch.amp`, `os`) in this file.

        Reuses the script's own alias (`import torch as T` -> `T`); otherwise names the module
        in full and queues an `import <top-level package>` for the import fix-up pass
        (`migrate.imports`).
        """
        local = self.imports.local_name_for(module)
        if local is not None:
            return cst.parse_expression(local)
        head, _, rest = module.partition(".")
        local_head = self.imports.local_name_for(head)
        if local_head is None:
            self.needed_imports.add(head)
            local_head = head
        return cst.parse_expression(f"{local_head}.{rest}" if rest else local_head)

    def name_ref(self, module: str, name: str) -> str:
        """The local name of `module.name` in this file (`DistributedConfig`).

        Reuses the script's own import of it; otherwise queues `from module import name` for the
        import passes (`migrate.imports`) and returns `name`.
        """
        existing = self.imports.local_name_for(f"{module}.{name}")
        if existing is not None:
            return existing
        names = self.needed_names.setdefault(module, [])
        if name not in names:
            names.append(name)
        return name
