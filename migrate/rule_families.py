"""The ordered table of rule families, as the shim's `PATCH_TYPES`: every rule and hook the codemod has.

Each entry names a module with a `RULES` tuple (possibly empty for the shared-hook modules) and
`@on(...)` hooks (a family split into a folder: its package, whose `PARTS` lists its modules). Hook order is this
table's order, then `PARTS` order, then definition order within a module:
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

**Families are switched on per file by their own tokens** (issue 39). A family's `tokens` are a regex
over the file's bytes (code, comments and docstrings alike: generous, since a family switched off where
it would have changed something is a wrong migration, one switched on for nothing only costs its hooks).
Only the families whose tokens occur, and those they `need` (the shared machinery their rewrites rely on:
`settings` dispatches their settings, `legacy` prunes the statements they mark removable and adds the
`from module import name` imports they ask for with `ctx.name_ref`, `retired` drops the imports they retire), are imported and dispatched for that file; a rule of a family that is
loaded but off for the file is off in it (`FileContext.off_rules`), so the settings another file's
family registered never act here. So a one-file run imports only its families' modules. The tokens must
name everything a family acts on: `tests/migrate/test_prefilter.py` migrates every fixture and every
rule's example with the families gated and with all of them on and requires the same result, and
`tests/migrate/test_rule_families.py` checks the tokens against the tables the families act on.

To add a rule: append a `Rule(...)` (with its fix `safety`, and `safety_reason` when unsafe) to
its family module's `RULES` and check `ctx.enabled(<id>)` in the hook that applies it; a TODO rule left by
several families is a `Rule(..., todo=True, message=...)` of `migrate.rules.todo_catalogue`, left by their hooks
with `todo`; to add a family: write the module (`RULES` plus `@on` hooks), list it here with its tokens, and extend the tokens of
a family whose hooks start acting on new names. `tests/migrate/test_registry.py` pins the rule ids, the
unsafe ones and the hook order.
"""

from __future__ import annotations

import importlib
import re
import sys
from functools import cache
from types import ModuleType
from typing import NamedTuple

from migrate.registry import Rule
from migrate.rules.base import Hook, hooks_of


class Family(NamedTuple):
    """One entry of the table: where the family lives and when a file needs it."""

    module: str  # the module holding `RULES` and the hooks
    tokens: bytes | None = None  # regex over a file's bytes; None: only as another family's need (or rules only)
    needs: tuple[str, ...] = ()  # families this one's rewrites rely on (their `name`), loaded and dispatched with it
    # A regex over a file's code: where it occurs, the family's hooks read statements that hold none of its tokens
    # (a binding looked up later), so the traversal visits every statement (`migrate.cold_statements`). None:
    # its hooks act on, and read, only statements holding its tokens (or imports); the default b"" matches any file.
    whole_file: bytes | None = b""
    # A regex a statement must hold for the family's hooks to change it, where narrower than `tokens` (which switch
    # the family on, generously: the device family's `device` and `rank` name what its rewrites read, not what they
    # change); None: `tokens`. Statements holding neither it nor another on family's are not visited.
    statement: bytes | None = None

    @property
    def name(self) -> str:
        """The module's last component: `device`, `optimum_training`, `catalog`."""
        return self.module.rpartition(".")[2]


_RULES = "migrate.rules."
_SHARED = ("settings",)  # the families that declare settings need `settings` to apply them

FAMILIES: tuple[Family, ...] = (
    Family(_RULES + "settings", whole_file=None),
    Family(
        _RULES + "device",
        rb"cuda|device|\.to\(|pipeline|map_location|rank|gpu|DDP|DataParallel|FSDP",
        _SHARED,
        whole_file=None,
        # what each rewrite needs in its statement: a `cuda` literal (device values, comparisons, `map_location`
        # through a variable set to one), `.to(` with an index or a rank first (NM106: `.to(0)`, `.to(local_rank)`,
        # `.to(dist.get_rank())`, `.to(int(os.environ["LOCAL_RANK"]))`; a device literal holds `cuda`), `pipeline`
        # (NM106's ordinal, NM107), `device_map` (NM105, its TRL helper), a data-parallel wrapper (NM106's
        # `device_ids`); `x.device`, `device=x.device`, `.to(x.dtype)` and `hf_device_map`, everywhere in library
        # code, hold none, and no hook of the family changes them
        statement=rb"cuda|"
        rb"\.to\(\s*(?:#[^\n]*\s*)*(?:[\d(]|int\s*\(|[\w.]*(?:rank|gpu|device_id|process_index|current_device|environ))|"
        rb"pipeline|\bdevice_map\b|get_kbit_device_map|DDP|DataParallel|FSDP",
    ),
    Family(_RULES + "cuda_api", rb"cuda|nccl|set_device|mem_get_info", ("retired",), whole_file=None),
    Family(_RULES + "legacy_tensor_types", rb"cuda(?:\.|[ \t]+import[^\n]*)\w*Tensor\b"),  # aliases: `Tensor(...)`
    Family(
        _RULES + "precision",
        rb"cuda|fp16|float16|half|torch_dtype|autocast|GradScaler|tf32|mixed_precision|amp",
        _SHARED,
        whole_file=None,
        # `.half()`, `torch.half` and `torch.cuda.amp` / `from torch.cuda import amp` as words: `rotate_half(x)` and
        # `num_samples`, common in model code, are no precision
        statement=rb"cuda|fp16|float16|\bhalf\b|torch_dtype|autocast|GradScaler|tf32|mixed_precision|\bamp\b",
    ),
    Family(
        _RULES + "attention",
        rb"flash|xformers|attn_impl|attention_impl",
        ("settings", "legacy", "retired"),
        whole_file=None,
    ),
    Family(
        _RULES + "quantization",
        rb"quantiz|load_in_|bitsandbytes|BitsAndBytes|bnb|paged_|8bit|4bit|prepare_model_for_",
        ("settings", "retired"),
        whole_file=None,
    ),
    # the calls it acts on are `get_kernel(...)`, `KernelConfig(...)` and a `use_kernels=` keyword, not every
    # `kernel_size` or `is_flash_attn_available(kernels_fallback_ok=True)` of model code
    Family(_RULES + "hub_kernels", rb"[Kk]ernel", whole_file=None, statement=rb"get_kernel|KernelConfig|use_kernels"),
    # `llm = LLM(...)` names a vLLM engine whose `.generate(...)` the family rewrites: a statement without its tokens
    Family(_RULES + "generate", rb"generate|vllm", whole_file=rb"vllm"),
    Family(_RULES + "static_shapes", rb"DataLoader|[Cc]ollat|compile", whole_file=None),
    Family(_RULES + "diffusers_cuda", rb"diffusers|Generator", ("legacy",)),
    Family(_RULES + "distributed", rb"nccl|backend", _SHARED, whole_file=None),
    Family(_RULES + "legacy", rb"optimum|torch_xla", whole_file=None),
    Family(
        _RULES + "drift",
        rb"Trainer|evaluation_strategy|overwrite_output_dir|logging_dir|warmup_ratio|max_seq_length|max_prompt_length|"
        rb"group_by_length|no_cuda|use_mps_device|report_to|setup_chat_format|torch_dtype|trust_remote_code|trl",
        ("retired", *_SHARED),
    ),
    Family(_RULES + "trl_moved", rb"trl", ("legacy",)),
    Family(_RULES + "optimum_training", rb"optimum", ("legacy",)),
    Family(_RULES + "optimum_inference", rb"optimum", ("legacy",)),
    Family(_RULES + "optimum_diffusion", rb"optimum", ("legacy",)),
    Family(
        _RULES + "tensor_parallel", rb"tp_plan|tp_size|device_mesh|distributed_config|optimum|consolidate", ("legacy",)
    ),
    Family(_RULES + "compile_env", rb"NEURON_|CUSTOM_CACHE_REPO"),
    Family(_RULES + "xla", rb"xla|XLA|PJRT", ("legacy",)),
    # on wherever another family is (_WITH_ANY): it tidies what their rewrites left
    Family(_RULES + "tidy", whole_file=None),
    Family(_RULES + "retired", whole_file=None),
    Family(
        _RULES + "todo",
        rb"cuda|vllm|deepspeed|triton|apex|unsloth|flash_attn|liger_kernel|gptq|awq|bitsandbytes|cpp_extension|"
        rb"DataParallel|(?:BitsAndBytes|GPTQ|Awq|Hqq|TorchAo|FbgemmFp8)Config|max_memory",
        whole_file=None,
    ),
    Family(_RULES + "todo_catalogue"),
    Family("migrate.configs.catalog"),
    Family("migrate.configs.cluster_catalog"),
    Family("migrate.configs.k8s_catalog"),
)
_RULES_ONLY = frozenset({"todo_catalogue", "catalog", "cluster_catalog", "k8s_catalog"})  # no hooks: never gated
ALL: tuple[str, ...] = tuple(f.name for f in FAMILIES if f.name not in _RULES_ONLY)  # every family with hooks
# Families with no tokens of their own that act only on what the others' rewrites leave (an emptied `if`,
# branches made identical, a comment above a removed line): switched on with any family.
_WITH_ANY = ("tidy",)


@cache
def _patterns() -> tuple[tuple[Family, re.Pattern[bytes]], ...]:
    """The families with tokens and their compiled regex, compiled on first use (a run of YAML files needs none)."""
    return tuple((family, re.compile(family.tokens)) for family in FAMILIES if family.tokens is not None)


def active_families(data: bytes) -> tuple[str, ...]:
    """The families a file needs, in table order: those whose tokens occur in `data`, and what they need."""
    found = {family.name for family, pattern in _patterns() if pattern.search(data)}
    if not found:
        return ()
    found.update(need for family in FAMILIES if family.name in found for need in family.needs)
    found.update(_WITH_ANY)
    return tuple(name for name in ALL if name in found)


def statement_tokens(names: tuple[str, ...], code: bytes) -> re.Pattern[bytes] | None:
    """The tokens a statement must hold for a hook of the families `names` to act on it or read it; None where `code`
    (the file's code lines) makes one of them read statements without its tokens (`Family.whole_file`), so every
    statement must be visited."""
    for family in FAMILIES:
        if family.name in names and family.whole_file is not None and re.search(family.whole_file, code):
            return None
    return _statement_pattern(names)


@cache
def _statement_pattern(names: tuple[str, ...]) -> re.Pattern[bytes]:
    tokens = [family.statement or family.tokens for family in FAMILIES if family.name in names and family.tokens]
    return re.compile(b"|".join(tokens))


def _module(family: Family) -> ModuleType:
    return importlib.import_module(family.module)


@cache
def hooks_for(names: tuple[str, ...]) -> dict[str, tuple[Hook, ...]]:
    """libcst class name -> the hooks of the families `names` for leaving such nodes, in table order."""
    hooks: dict[str, list[Hook]] = {}
    for family in FAMILIES:
        if family.name in names:
            for node_type, hook in hooks_of(_module(family)):
                hooks.setdefault(node_type, []).append(hook)
    return {node_type: tuple(found) for node_type, found in hooks.items()}


def rules_off(names: tuple[str, ...]) -> frozenset[str]:
    """The ids of the rules of families loaded in this process (by an earlier file, or imported by an active
    family for its helpers) but not among `names`: off for this file, so what a file gets never depends on
    the files migrated before it."""
    off: set[str] = set()
    for family in FAMILIES:
        if family.name not in names and family.name not in _RULES_ONLY:
            module = sys.modules.get(family.module)
            if module is not None:
                off.update(rule.id for rule in module.RULES)
    return frozenset(off)


def family_modules() -> tuple[ModuleType, ...]:
    """Every family's module, in table order (imports them all: for the rule index, docs and tests)."""
    return tuple(_module(family) for family in FAMILIES)


def all_hooks() -> dict[str, tuple[Hook, ...]]:
    """Every family's hooks by libcst class name, in order: what a file with all families on runs."""
    return hooks_for(ALL)


@cache
def _index() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for family in family_modules():
        for rule in family.RULES:
            if rule.id in rules:  # ids are unique and stable: a duplicate is a programming error
                raise ValueError(f"duplicate rule id {rule.id} in {family.__name__}")
            rules[rule.id] = rule
    return dict(sorted(rules.items()))


_LOADED: dict[str, Rule] = {}  # the rules of the family modules imported so far (a report names the ones that hit)


def all_rules() -> list[Rule]:
    """All rules in id order."""
    return list(_index().values())


def get_rule(rule_id: str) -> Rule | None:
    """Look a rule up by exact id, case-insensitively.

    The families already imported are asked first: a report of a one-file run names the rules that hit,
    whose families that run imported, and importing every other family for their names would cost the
    run more than the migration.
    """
    rule_id = rule_id.upper()
    if rule_id not in _LOADED:
        for family in FAMILIES:
            module = sys.modules.get(family.module)
            if module is not None:
                _LOADED.update((rule.id, rule) for rule in module.RULES)
    found = _LOADED.get(rule_id)
    return found if found is not None else _index().get(rule_id)
