"""NM710 TRL 1.x moved names: `from trl import ORPOTrainer` fails at import; the class lives in `trl.experimental`.

Checked against the installed trl 1.16.0: the names in `MOVED` are not attributes of `trl` and are exported by
the `trl.experimental.<module>` named (`pkgutil.iter_modules(trl.experimental.__path__)`, each module's
`__all__`). TRL 0.x's `trl.commands` package is gone too; of its `cli_utils`, `TrlParser` and
`init_zero_verbose` are exported by `trl` itself (`trl/scripts/utils.py`), same classes and signatures
(philschmid's `run_fsdp_qlora.py` imports `TrlParser` from there). A TRL 0.x script importing them dies
before anything else runs, so the import moves (aliases kept) and `trl.ORPOConfig(...)` reads the moved name.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.names import dotted
from migrate.registry import Rule
from migrate.rules.base import HookResult, on
from migrate.rules.todo_catalogue import flatten

# name exported at the top of TRL 0.x -> the trl.experimental module exporting it in TRL 1.16
MOVED: dict[str, str] = {
    **{f"ORPO{kind}": "trl.experimental.orpo" for kind in ("Config", "Trainer")},
    **{f"CPO{kind}": "trl.experimental.cpo" for kind in ("Config", "Trainer")},
    **{f"GKD{kind}": "trl.experimental.gkd" for kind in ("Config", "Trainer")},
    **{f"OnlineDPO{kind}": "trl.experimental.online_dpo" for kind in ("Config", "Trainer")},
    "MergeModelCallback": "trl.experimental.merge_model_callback",
    "DataCollatorForChatML": "trl.experimental.utils",
}

# module a TRL 0.x script imports from -> {name: the TRL 1.16 module exporting it}
MOVED_FROM: dict[str, dict[str, str]] = {
    "trl": MOVED,
    "trl.commands.cli_utils": {"TrlParser": "trl", "init_zero_verbose": "trl"},
}

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM710",
        name="trl-experimental",
        safety="safe",
        summary="`from trl import ORPOTrainer` (also CPO, GKD, OnlineDPO, ...) -> `from trl.experimental.orpo import ...`; "
        "`from trl.commands.cli_utils import TrlParser` -> `from trl import TrlParser`.",
        rationale="TRL 1.x moved the ORPO, CPO, GKD and Online DPO trainers and configs, `MergeModelCallback` and "
        "`DataCollatorForChatML` out of the package's top level into `trl.experimental.<module>`, and removed "
        "`trl.commands` (its `TrlParser` and `init_zero_verbose` are exported by `trl`; checked against trl "
        "1.16.0), so a TRL 0.x script's import is an ImportError before anything runs. The import "
        "moves, names and aliases kept; `trl.ORPOConfig` as an attribute reads the moved name. TRL warns "
        "that experimental APIs may change (`TRL_EXPERIMENTAL_SILENCE=1` silences it).",
        before="from trl import DPOConfig, ORPOConfig, ORPOTrainer\n",
        after="from trl import DPOConfig\nfrom trl.experimental.orpo import ORPOConfig, ORPOTrainer\n",
    ),
)


@on("SimpleStatementLine", "NM710")
def moved_trl_import(node: cst.SimpleStatementLine, ctx: FileContext) -> HookResult:
    """`from trl import DPOConfig, ORPOConfig` -> `from trl import DPOConfig` + `from trl.experimental.orpo import ...`
    (and `from trl.commands.cli_utils import TrlParser` -> `from trl import TrlParser`)."""
    if len(node.body) != 1 or type(node.body[0]) is not cst.ImportFrom or not ctx.enabled("NM710"):
        return node
    statement = node.body[0]
    if statement.relative or isinstance(statement.names, cst.ImportStar):
        return node
    moves = MOVED_FROM.get(dotted(statement.module) or "") if statement.module is not None else None
    if moves is None:
        return node
    moved: dict[str, list[cst.ImportAlias]] = {}
    kept: list[cst.ImportAlias] = []
    for alias in statement.names:
        target = moves.get(alias.name.value) if type(alias.name) is cst.Name else None
        if target is None:
            kept.append(alias)
        else:
            moved.setdefault(target, []).append(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT))
    if not moved:
        return node
    ctx.hit("NM710")
    lines = [
        cst.SimpleStatementLine(
            body=[cst.ImportFrom(module=cst.parse_expression(module), names=_commas(aliases))]  # type: ignore[arg-type]
        )
        for module, aliases in moved.items()
    ]
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        first = node.with_changes(body=[statement.with_changes(names=kept)])
    else:
        first = lines.pop(0).with_changes(
            leading_lines=node.leading_lines, trailing_whitespace=node.trailing_whitespace
        )
    return flatten(ctx, [first, *lines])


def _commas(aliases: list[cst.ImportAlias]) -> list[cst.ImportAlias]:
    """`a, b, c` on one line."""
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [alias.with_changes(comma=comma) for alias in aliases[:-1]] + aliases[-1:]


@on("Attribute", "NM710")
def moved_trl_attribute(node: cst.Attribute, ctx: FileContext) -> cst.BaseExpression:
    """`trl.ORPOConfig(...)` -> `ORPOConfig(...)`, imported from its `trl.experimental` module."""
    target = MOVED.get(node.attr.value)
    if target is None or not ctx.enabled("NM710") or ctx.qualify(node) != f"trl.{node.attr.value}":
        return node
    ctx.hit("NM710")
    return cst.Name(ctx.name_ref(target, node.attr.value))
