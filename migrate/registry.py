"""What a rule is (`Rule`) and which rules are on (`Selection`).

Rules are data (id, summary, rationale, examples) so that `--explain`, `docs/rules.md` and
`--select/--ignore` all read the same source of truth. A `Rule(...)` call is the one way to declare a rule,
whatever it does (a Python rewrite, a TODO, a config or launcher edit), so `--explain` (`migrate.rule_sources`)
finds every rule's declaration the same way. Each family module declares its rules in a module-level `RULES`
tuple next to the hooks that apply them and refer to them by id; `migrate.rule_families` lists the family
modules. This module imports none of them, so a family can import it without an import loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from migrate.markers import TODO_PREFIX

Safety = Literal["safe", "unsafe"]


@dataclass(frozen=True)
class Rule:
    """One migration rule.

    `before`/`after` are small, complete examples of a `language` file; `docs/rules.md` and
    `--explain` show them, and a test migrates `before` and checks it yields `after`.

    `safety` is the fix safety, as in ruff: "safe" when the rewrite keeps what the script does
    (a device or API renamed to its Neuron equivalent, a TODO comment), "unsafe" when it changes
    behaviour a reviewer should look at (numerics, data seen, memory, shapes); `safety_reason`
    says how, in one line, and is required exactly for unsafe rules.

    `message` is a TODO rule's own text, the comment its hooks leave unless they word one for the case; its
    `after` then holds `{t}` where that comment line goes, so the example cannot drift from the text.
    """

    id: str
    name: str
    summary: str
    rationale: str
    before: str
    after: str
    safety: Safety
    safety_reason: str = ""
    todo: bool = False  # True for rules that annotate instead of rewriting (all NM9xx)
    language: str = "python"  # the kind of file the examples are: python, yaml, shell
    message: str = ""  # a TODO rule's own comment text ("" where every hook words its own)

    def __post_init__(self) -> None:
        if self.message:
            if not self.todo:
                raise ValueError(f"{self.id}: only a TODO rule has a message")
            line = f"{TODO_PREFIX}{self.id}): {self.message}\n"
            object.__setattr__(self, "after", self.after.replace("{t}", line))  # frozen: set once, here
        if self.safety not in ("safe", "unsafe"):
            raise ValueError(f"{self.id}: safety must be 'safe' or 'unsafe', not {self.safety!r}")
        if (self.safety == "unsafe") != bool(self.safety_reason):
            raise ValueError(f"{self.id}: an unsafe rule needs a one-line safety_reason, a safe one none")
        if "\n" in self.safety_reason:
            raise ValueError(f"{self.id}: safety_reason must be one line")

    @property
    def family(self) -> str:
        """The id prefix that groups rules: NM1, NM2, ..., NM9."""
        return self.id[:3]


@dataclass(frozen=True)
class Selection:
    """Which rules are on: `select` and `ignore` hold ids or id prefixes (`NM2`, `NM10`)."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = field(default=())

    def enabled(self, rule_id: str) -> bool:
        """A rule is on when it matches a select prefix (or none is given) and no ignore prefix.

        The longest matching prefix wins, so `--select NM1 --ignore NM104` and
        `--ignore NM1 --select NM104` both do what they say.
        """
        if not self.select and not self.ignore:  # the default, asked tens of thousands of times a file
            return True
        sel = max((len(p) for p in self.select if rule_id.startswith(p.upper())), default=-1)
        ign = max((len(p) for p in self.ignore if rule_id.startswith(p.upper())), default=-1)
        if not self.select:
            sel = 0
        return sel >= 0 and sel > ign
