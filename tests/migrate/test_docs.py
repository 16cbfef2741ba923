"""docs/rules.md is generated from the registry and must not drift from it; `--explain` finds a rule by id."""

import ast
import inspect
import re
from pathlib import Path
from types import ModuleType

from click.testing import CliRunner

from migrate.cli import main
from migrate.docs import rules_markdown
from migrate.rule_families import all_rules, family_modules
from migrate.rule_sources import places
from migrate.rules.base import RULES_ATTRIBUTE, hooks_of

ROOT = Path(__file__).resolve().parents[2]


def test_rules_doc_in_sync():
    assert (ROOT / "docs" / "rules.md").read_text(encoding="utf-8") == rules_markdown(), (
        "regenerate with: python -m migrate --rules-doc > docs/rules.md"
    )


def test_explain():
    result = CliRunner().invoke(main, ["--explain", "nm401"])
    assert result.exit_code == 0
    assert "nccl" in result.output and "Before:" in result.output
    assert CliRunner().invoke(main, ["--explain", "NM000"]).exit_code == 2


def test_explain_says_where_the_rule_is_declared_and_applied():
    out = CliRunner().invoke(main, ["--explain", "NM905"]).stdout
    head = out.splitlines()[:5]
    assert head[:2] == ["NM905 custom-kernels", "fix safety: safe"]
    declared = head[2].removeprefix("declared at: ")
    applied = head[3].removeprefix("applied at: ").split(", ")
    path, line = declared.split(":")
    assert path == "migrate/rules/todo_catalogue/cuda.py"
    assert 'id="NM905"' in (ROOT / path).read_text().splitlines()[int(line) - 1]  # the line that opens it
    todo_lines = (ROOT / "migrate/rules/todo.py").read_text().splitlines()
    hooks = [int(p.split(":")[1]) for p in applied if p.startswith("migrate/rules/todo.py:")]
    assert any('todo(ctx, "NM905")' in todo_lines[line - 1] for line in hooks)
    tagged = head[4].removeprefix("hooks: ").split(", ")
    assert [hook.split(" ", 1)[1] for hook in tagged] == [
        "import_todo (Import)",
        "import_from_todo (ImportFrom)",
        "call_todo (Call)",
    ]
    hook_path, hook_line = tagged[0].split(" ")[0].split(":")
    assert (ROOT / hook_path).read_text().splitlines()[int(hook_line) - 1].startswith("def import_todo(")
    assert "## NM905 `custom-kernels`" in out  # then the rule's doc


_RULE_ID = re.compile(r"^NM\d{3}$")


def _named_ids(family: ModuleType) -> dict[tuple[str, str], set[str]]:
    """The rule ids each function of `family` (by module and name) names: in its body, and in the tables and functions it uses, its
    module's or (a family split into a folder) those it imports from the family's other modules."""
    parts = getattr(family, "PARTS", (family,))
    names = {part.__name__ for part in parts}
    top: dict[tuple[str, str], ast.AST] = {}  # (module, name) -> its definition
    scope: dict[str, dict[str, tuple[str, str]]] = {}  # module -> name there -> (module, name) defining it
    for part in parts:
        local = scope.setdefault(part.__name__, {})
        for node in ast.parse(inspect.getsource(part)).body:
            if isinstance(node, ast.Assign | ast.AnnAssign):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Name):
                        top[part.__name__, target.id] = node
                        local[target.id] = (part.__name__, target.id)
            elif isinstance(node, ast.FunctionDef):
                top[part.__name__, node.name] = node
                local[node.name] = (part.__name__, node.name)
            elif isinstance(node, ast.ImportFrom) and node.module in names:
                for alias in node.names:
                    local[alias.asname or alias.name] = (node.module, alias.name)

    def named(module: str, node: ast.AST, seen: set[tuple[str, str]]) -> set[str]:
        found: set[str] = set()
        for child in ast.walk(node):
            if isinstance(child, ast.Constant) and isinstance(child.value, str) and _RULE_ID.match(child.value):
                found.add(child.value)
            elif isinstance(child, ast.Name) and child.id in scope[module]:
                key = scope[module][child.id]
                if key not in seen and key in top:
                    seen.add(key)
                    found |= named(key[0], top[key], seen)
        return found

    return {
        (module, name): named(module, ast.Module(node.body, []), {(module, name)})
        for (module, name), node in top.items()
        if isinstance(node, ast.FunctionDef)
    }


def test_each_hook_is_tagged_with_the_rules_its_code_names():
    """A hook's `@on(node, *ids)` tag is where a reader (and `--explain`) finds the code of a rule: it names exactly
    the ids the hook's code names, directly or through its module's tables and helpers."""
    wrong = {}
    for module in family_modules():
        names = _named_ids(module)
        for _, hook in hooks_of(module):
            tagged, named = set(getattr(hook, RULES_ATTRIBUTE)), names[hook.__module__, hook.__name__]
            if tagged != named:
                wrong[f"{module.__name__}.{hook.__name__}"] = (sorted(tagged), sorted(named))
    assert wrong == {}, "tag (left) differs from the ids the hook's code names (right)"


def test_every_rule_is_declared_in_exactly_one_place():
    assert {rule.id: len(places(rule.id)[0]) for rule in all_rules()} == {rule.id: 1 for rule in all_rules()}


def test_explain_points_every_rule_at_its_rule_call_and_its_hooks():
    """For every id, `--explain`'s "declared at" names the line of the `Rule(...)` that declares it (the one way to
    declare a rule) and each "hooks" entry the `def` line of a function tagged with it."""
    wrong = []
    for rule in all_rules():
        head = CliRunner().invoke(main, ["--explain", rule.id]).stdout.splitlines()[:5]
        declared = next(line.removeprefix("declared at: ") for line in head if line.startswith("declared at: "))
        path, line = declared.split(":")
        lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
        opening = next(lines[n] for n in range(int(line) - 1, -1, -1) if "Rule(" in lines[n])
        if f'"{rule.id}"' not in lines[int(line) - 1] or not opening.strip().startswith("Rule("):
            wrong.append(declared)
        tagged = next((line.removeprefix("hooks: ") for line in head if line.startswith("hooks: ")), "")
        for hook in tagged.split(", ") if tagged not in ("", "-") else ():  # "-": applied by shared hooks only
            where, name = hook.split(" ")[:2]
            hook_path, hook_line = where.split(":")
            if not (ROOT / hook_path).read_text().splitlines()[int(hook_line) - 1].startswith(f"def {name}("):
                wrong.append(hook)
    assert wrong == []


def test_no_rule_module_is_over_500_lines():
    """A reader finds a rule's code by its module: a family past ~500 lines is split into a folder of modules along
    its own seams (`migrate/rules/<family>/`, one sub-topic each, its docstring the rationale)."""
    long = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "migrate" / "rules").rglob("*.py")
        if len(path.read_text(encoding="utf-8").splitlines()) > 500
    }
    assert long == set()
