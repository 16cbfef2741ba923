"""The ordered table of rule families, as the shim's `PATCH_TYPES`: every rule and hook the codemod has.

Each entry is a module with a `RULES` tuple (possibly empty for the shared-hook modules) and
`@on(...)` hooks. Hook order is this table's order, then definition order within a module:
- `settings` first: its generic hooks (a setting as a keyword, an assignment, an argparse default,
  a dict entry) run before the families whose settings they dispatch to see the node;
- device literals before the rest, precision before drift, so later hooks see renamed values;
- `legacy` (the removal and import machinery the Optimum Neuron and torch_xla families share)
  before those families, which then run after the generic rewrites have already renamed
  `torch_dtype` or `tokenizer=` in the calls they move;
- `retired` after the rewriting families: it drops the imports of names their rewrites retired, once
  the tree is final;
- `todo` last among the Python hooks, so it sees the final call shapes;
- `todo_catalogue` (the NM9xx TODO texts, whose hooks live in `todo` and the families that
  detect them) and `configs.catalog` (NM8xx, applied by the YAML/shell migrators) carry rules only.

To add a rule: append a `Rule(...)` (with its fix `safety`, and `safety_reason` when unsafe) to
its family module's `RULES` and check `ctx.enabled(<id>)` in the hook that applies it; a TODO rule
is a `Todo(...)` entry of `migrate.rules.todo_catalogue` instead, left by its family's hook with `todo`; to add a
family: write the module (`RULES` plus `@on` hooks) and list it here. `tests/migrate/test_registry.py`
pins the rule ids, the unsafe ones and the hook order.
"""

from __future__ import annotations

from types import ModuleType

from migrate.configs import catalog, cluster_catalog, k8s_catalog
from migrate.registry import Rule
from migrate.rules import (
    attention,
    compile_env,
    cuda_api,
    device,
    diffusers_cuda,
    distributed,
    drift,
    generate,
    hub_kernels,
    legacy,
    legacy_tensor_types,
    optimum_diffusion,
    optimum_inference,
    optimum_training,
    precision,
    quantization,
    retired,
    settings,
    static_shapes,
    tensor_parallel,
    tidy,
    todo,
    todo_catalogue,
    trl_moved,
    xla,
)
from migrate.rules.base import Hook, hooks_of

RULE_FAMILIES: tuple[ModuleType, ...] = (
    settings,
    device,
    cuda_api,
    legacy_tensor_types,
    precision,
    attention,
    quantization,
    hub_kernels,
    generate,
    static_shapes,
    diffusers_cuda,
    distributed,
    legacy,
    drift,
    trl_moved,
    optimum_training,
    optimum_inference,
    optimum_diffusion,
    tensor_parallel,
    compile_env,
    xla,
    tidy,
    retired,
    todo,
    todo_catalogue,
    catalog,
    cluster_catalog,
    k8s_catalog,
)


def _index() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for family in RULE_FAMILIES:
        for rule in family.RULES:
            if rule.id in rules:  # ids are unique and stable: a duplicate is a programming error
                raise ValueError(f"duplicate rule id {rule.id} in {family.__name__}")
            rules[rule.id] = rule
    return dict(sorted(rules.items()))


def _hooks() -> dict[str, tuple[Hook, ...]]:
    hooks: dict[str, list[Hook]] = {}
    for family in RULE_FAMILIES:
        for node_type, hook in hooks_of(family):
            hooks.setdefault(node_type, []).append(hook)
    return {node_type: tuple(found) for node_type, found in hooks.items()}


_RULES = _index()
HOOKS: dict[str, tuple[Hook, ...]] = _hooks()  # libcst class name -> hooks for leaving such nodes, in order


def all_rules() -> list[Rule]:
    """All rules in id order."""
    return list(_RULES.values())


def get_rule(rule_id: str) -> Rule | None:
    """Look a rule up by exact id, case-insensitively."""
    return _RULES.get(rule_id.upper())
