"""NM8xx rules for YAML configs: accelerate configs and TRL/transformers recipe files.

Which YAML files are touched is decided from their top-level keys, so a repository's CI
workflows, compose files and model cards are left alone even though the walk reads them:
- an **accelerate config** has `distributed_type` plus another key `accelerate config` writes;
- a **Kubernetes manifest** has `apiVersion` and `kind` (`migrate.configs.k8s_rules`);
- a **recipe** (TRL / alignment-handbook / open-r1 style, fed to `TrlParser` or
  `HfArgumentParser.parse_yaml_file`) has a training-argument key such as `output_dir`,
  `model_name_or_path` or `learning_rate`.

ruamel.yaml's round-trip composer gives each key and value node its exact character span;
the edits are spliced into the original text (`migrate.configs.edits`), so comments, key
order, quoting and indentation stay as written, and the result is composed again before it
is accepted.

Recipe keys that transformers 5 / TRL 1.x renamed or removed (NM808) come from `drift.FIELDS`,
the table the Python rules (NM701-NM709) and the launch-line rule (NM817) use, so a field
leaves a `TrainingArguments(...)` call, a `--flag` and a recipe key together.

Anchors and merge keys: the rules see a mapping's keys with those it merges (`<<: *defaults`)
folded in, and values with anchors (`&dt`) like any other, so nothing reached that way passes
unmigrated. An edit inside a node that is shared through an anchor would change every alias of it,
so it is made where the node is defined only when every use is the same key (`distributed_type: &dt
MULTI_GPU`, the anchor kept); otherwise the rule leaves a TODO at the definition's line naming the
change, and `--check` fails on it.
"""

from __future__ import annotations

import re
from typing import TypeGuard

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from migrate.configs import cores, k8s_rules
from migrate.configs.catalog import TODO_TEXT
from migrate.configs.edits import Changes
from migrate.configs.textfile import migrate_text
from migrate.options import Options
from migrate.results import FileResult
from migrate.rules.drift import FIELDS as DRIFT
from migrate.rules.drift import Removed
from migrate.rules.todo_catalogue import quantized_load_message

ACCELERATE_KEYS = frozenset(
    {
        "compute_environment",
        "num_processes",
        "machine_rank",
        "num_machines",
        "mixed_precision",
        "main_training_function",
        "use_cpu",
        "rdzv_backend",
        "same_network",
        "gpu_ids",
    }
)
RECIPE_KEYS = frozenset(
    {
        "output_dir",
        "model_name_or_path",
        "learning_rate",
        "per_device_train_batch_size",
        "num_train_epochs",
        "max_steps",
        "gradient_accumulation_steps",
        "dataset_name",
        "dataset_mixture",
        "dataset_mixer",
        "lr_scheduler_type",
    }
)
# bytes one of the rules needs to see; a file without any of them is not composed at all
_TRIGGER = re.compile(
    rb"MULTI_GPU|DEEPSPEED|fp16|gpu_ids|flash|use_liger|load_in_[48]bit|use_vllm|tf32|torch_dtype|apiVersion|"
    + "|".join(DRIFT).encode()
)
_BOOL = "tag:yaml.org,2002:bool"
_MERGE = "tag:yaml.org,2002:merge"
_TRUE = frozenset({"true", "yes", "on"})


def migrate_yaml(data: bytes, path: str, options: Options) -> FileResult:
    """Migrate one YAML file; files that are neither accelerate configs nor recipes stay as they are."""
    if not _TRIGGER.search(data):
        return FileResult(path, "unchanged", kind="yaml")
    try:
        return migrate_text(data, path, "yaml", options, _rules, _problem)
    except _Unparsable as exc:
        return FileResult(
            path, "error", error=f"{path}:{exc.line}: {exc}; file skipped", error_line=exc.line, kind="yaml"
        )


class _Unparsable(ValueError):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def _compose(text: str) -> list[Node]:
    try:
        return [doc for doc in YAML(typ="rt").compose_all(text) if doc is not None]
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise _Unparsable(f"YAML syntax error: {exc.problem or exc.context}", line) from None
    except YAMLError as exc:
        raise _Unparsable(f"YAML error: {exc}", 1) from None


def _problem(text: str) -> str | None:
    try:
        _compose(text)
    except _Unparsable as exc:
        return f"line {exc.line}: {exc}"
    return None


def _rules(changes: Changes) -> None:
    for doc in _compose(changes.text):
        if type(doc) is not MappingNode:
            continue
        keys = _scalars(doc)
        first = len(changes.edits)
        if k8s_rules.is_manifest(keys):  # its own anchors: a renamed resource is right in every alias
            k8s_rules.manifest(changes, doc)
            continue
        if "distributed_type" in keys and len(keys.keys() & ACCELERATE_KEYS) >= 1:
            _accelerate(changes, keys)
        elif keys.keys() & RECIPE_KEYS:
            _recipe(changes, doc, keys)
        _shared_edits_to_todos(changes, first, doc)


def _scalars(mapping: MappingNode) -> dict[str, tuple[ScalarNode, Node]]:
    """Top-level `key -> (key node, value node)` for plain scalar keys, with the entries merge keys bring.

    As YAML merges them: a key written in the mapping wins over a merged one, and of several
    merged mappings (`<<: [*a, *b]`) the earlier wins. A merged entry's nodes are the ones where
    the merged mapping is defined.
    """
    own: dict[str, tuple[ScalarNode, Node]] = {}
    merged: dict[str, tuple[ScalarNode, Node]] = {}
    for key, value in mapping.value:
        if type(key) is not ScalarNode:
            continue
        if key.tag != _MERGE:
            own[key.value] = (key, value)
            continue
        for source in value.value if type(value) is SequenceNode else [value]:
            if type(source) is MappingNode:
                for name, entry in _scalars(source).items():
                    merged.setdefault(name, entry)
    return {**merged, **own}


def _shared_edits_to_todos(changes: Changes, first: int, doc: Node) -> None:
    """Turn the edits made since `changes.edits[first]` that fall inside a node shared through an
    anchor into TODOs at that line, unless the node is a scalar every use of which is the same key.

    An edit goes with the others of its rule and site (`fp16` to `false` and `bf16` to `true`), so
    a rewrite is never half made.
    """
    shared, uniform = _anchored_spans(doc, changes.text)
    if not shared:
        return
    made = changes.edits[first:]
    blocked = {
        (edit.rule, edit.anchor)
        for edit in made
        if any(_inside(edit.start, edit.end, span) for span in shared)
        and not any(span[0] <= edit.start and edit.end <= span[1] for span in uniform)
    }
    if not blocked:
        return
    del changes.edits[first:]
    for edit in made:
        if (edit.rule, edit.anchor) not in blocked:
            changes.edits.append(edit)
    for rule, site in sorted(blocked, key=lambda b: b[1]):
        group = [e for e in made if (e.rule, e.anchor) == (rule, site)]
        at = min(e.start for e in group)
        what = "; ".join(_described(changes, e.start, e.end, e.text, at) for e in group)
        changes.todo(
            rule,
            at,
            f"shared through a YAML anchor or merge key, so not rewritten: {what}; "
            "make the change here if it is right for every use",
        )


def _described(changes: Changes, start: int, end: int, new: str, at: int) -> str:
    """`'fp16' -> 'bf16'`, `add '...'`, `remove '...'`; with `at line N` when not on the TODO's line."""
    old = changes.text[start:end].strip()
    what = f"add {new.strip()!r}" if not old else f"{old!r} -> {new.strip()!r}" if new.strip() else f"remove {old!r}"
    line = changes.line_of(start)
    return what if line == changes.line_of(at) else f"{what} at line {line}"


def _inside(start: int, end: int, span: tuple[int, int]) -> bool:
    """Whether the edit of `[start, end)` (an insertion when equal) changes text inside `span`."""
    if start == end:
        return span[0] < start < span[1]
    return start < span[1] and end > span[0]


def _anchored_spans(doc: Node, text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The text spans of every anchored node (key or value) in `doc`, and of those the anchored
    scalars whose every use is the value of one same key name (the span without the `&name`)."""
    shared: dict[int, tuple[int, int]] = {}
    uses: dict[int, set[str | None]] = {}
    values: dict[int, ScalarNode] = {}
    seen: set[int] = set()

    def visit(node: Node, key: str | None) -> None:
        if node.anchor is not None:
            shared[id(node)] = (node.start_mark.index, node.end_mark.index)
            if type(node) is ScalarNode:
                uses.setdefault(id(node), set()).add(key)
                values[id(node)] = node
        if id(node) in seen:
            return
        seen.add(id(node))
        if type(node) is MappingNode:
            for k, v in node.value:
                visit(k, None)
                visit(v, k.value if type(k) is ScalarNode and k.tag != _MERGE else None)
        elif type(node) is SequenceNode:
            for item in node.value:
                visit(item, None)

    visit(doc, None)
    uniform = [_value_span(values[i], text) for i, names in uses.items() if len(names) == 1 and None not in names]
    return list(shared.values()), uniform


def _value_span(node: ScalarNode, text: str) -> tuple[int, int]:
    """A scalar's value in `text`: after its `&name` (kept), inside its quotes when it is quoted."""
    start, end = node.start_mark.index, node.end_mark.index
    if node.anchor is not None and text.startswith(f"&{node.anchor}", start):
        start += len(node.anchor) + 1
        while start < end and text[start] in " \t":
            start += 1
    if node.style in ("'", '"'):
        start, end = start + 1, end - 1
    return start, end


def _set(changes: Changes, rule: str, node: ScalarNode, value: str, anchor: int | None = None) -> None:
    """Replace a scalar's value, keeping its anchor and quotes.

    An anchored value's span is its definition, which every `*name` alias shares: whether the edit
    stands or becomes a TODO is `_shared_edits_to_todos`'s decision.
    """
    start, end = _value_span(node, changes.text)
    changes.replace(rule, start, end, value, node.start_mark.index if anchor is None else anchor)


def _true(node: Node) -> TypeGuard[ScalarNode]:
    """A plain `true`/`yes`/`on` (anchored or not)."""
    return type(node) is ScalarNode and node.tag == _BOOL and node.value.lower() in _TRUE


def _false(node: Node) -> bool:
    """A plain `false`/`no`/`off` (anchored or not)."""
    return type(node) is ScalarNode and node.tag == _BOOL and node.value.lower() not in _TRUE


def _empty(node: Node) -> bool:
    """A value left out (`logging_dir:`): its marks point at the next token, not at this line."""
    return type(node) is ScalarNode and node.value == "" and node.style is None


def _accelerate(changes: Changes, keys: dict[str, tuple[ScalarNode, Node]]) -> None:
    key, value = keys["distributed_type"]
    if type(value) is ScalarNode:
        if value.value == "MULTI_GPU" and changes.enabled("NM801"):
            _set(changes, "NM801", value, "MULTI_NEURON")
        elif value.value == "DEEPSPEED":
            changes.todo("NM811", key.start_mark.index, TODO_TEXT["NM811"])
    precision = keys.get("mixed_precision")
    if precision and type(precision[1]) is ScalarNode and precision[1].value == "fp16" and changes.enabled("NM802"):
        _set(changes, "NM802", precision[1], "bf16")
    gpu_ids = keys.get("gpu_ids")
    if gpu_ids and type(gpu_ids[1]) is ScalarNode and gpu_ids[1].value.strip().lower() != "all":
        processes = keys.get("num_processes")
        wanted = int(processes[1].value) if processes and str(processes[1].value).isdigit() else None
        problem = cores.gpu_ids_problem(str(gpu_ids[1].value), wanted)
        if problem:
            changes.todo("NM804", gpu_ids[0].start_mark.index, problem)


def _recipe(changes: Changes, doc: MappingNode, keys: dict[str, tuple[ScalarNode, Node]]) -> None:
    if "fp16" in keys and _true(keys["fp16"][1]) and changes.enabled("NM802"):
        key, _ = keys["fp16"]
        if "bf16" in keys:
            _set(changes, "NM802", keys["fp16"][1], "false", anchor=key.start_mark.index)
            if type(keys["bf16"][1]) is ScalarNode:
                _set(changes, "NM802", keys["bf16"][1], "true", anchor=key.start_mark.index)
        else:
            changes.replace("NM802", key.start_mark.index, key.end_mark.index, "bf16")
    if changes.enabled("NM805"):
        for attn in _attn_values(doc):
            _set(changes, "NM805", attn, "sdpa")
        for name in ("use_liger_kernel", "use_liger"):
            if name in keys and _true(flag := keys[name][1]):
                _set(changes, "NM805", flag, "false")
    for name in ("load_in_4bit", "load_in_8bit"):
        if name in keys and _true(flag := keys[name][1]) and changes.enabled("NM806"):
            _set(changes, "NM806", flag, "false")
            changes.todo("NM908", keys[name][0].start_mark.index, quantized_load_message(name.removeprefix("load_in_")))
    if "use_vllm" in keys and _true(value := keys["use_vllm"][1]) and changes.enabled("NM807"):
        key = keys["use_vllm"][0]
        _set(changes, "NM807", value, "false")
        if "cache_implementation" not in keys:
            end = changes.line_end(value.end_mark.index)
            newline = "\r\n" if "\r\n" in changes.text else "\n"
            indent = " " * key.start_mark.column
            changes.replace(
                "NM807", end, end, f"{newline}{indent}cache_implementation: static", anchor=value.start_mark.index
            )
    if "tf32" in keys and _true(keys["tf32"][1]) and changes.enabled("NM809"):
        key, value = keys["tf32"]
        if key.start_mark.line == value.end_mark.line:
            start = key.start_mark.index
            end = changes.line_end(start)
            line = changes.text[start:end]
            changes.replace("NM809", start, end, f"# {line}  # neuron-migrate NM809: tf32 is CUDA-only")
    if changes.enabled("NM818"):
        for key, _, mapping in _entries(doc, "torch_dtype"):
            if any(type(k) is ScalarNode and k.value == "dtype" for k, _ in mapping.value):
                changes.todo("NM818", key.start_mark.index, TODO_TEXT["NM818"])
            else:
                changes.replace("NM818", key.start_mark.index, key.end_mark.index, "dtype")
    if changes.enabled("NM808"):
        for name, (key, value) in keys.items():
            if name in DRIFT:
                _drift_key(changes, name, key, value, DRIFT[name], keys)


def _drift_key(
    changes: Changes,
    name: str,
    key: ScalarNode,
    value: Node,
    removed: Removed,
    keys: dict[str, tuple[ScalarNode, Node]],
) -> None:
    """NM808: a renamed key takes its new name, a removed one goes (noted); a TODO where neither is faithful.

    Every recipe is in scope, whatever the `owners` of the field: a recipe that worked held only
    fields of the class it was written for, so the key itself says the class had it.
    """
    start = key.start_mark.index
    if removed.new is None or (removed.on_value is not None and _false(value)):
        _drop(changes, name, key, value, removed.why)
    elif removed.new in keys:
        changes.todo("NM808", start, f"{name} is now {removed.new}, which is set too: keep one of them")
    elif removed.on_value is None:
        changes.replace("NM808", start, key.end_mark.index, removed.new)
    elif _true(value):
        changes.replace("NM808", start, key.end_mark.index, removed.new)
        _set(changes, "NM808", value, removed.on_value, anchor=start)
    else:
        changes.todo("NM808", start, f"{name}: {removed.why}")


def _drop(changes: Changes, name: str, key: ScalarNode, value: Node, why: str) -> None:
    """Delete a `key: value` line, or TODO when the entry is not a line of its own or defines an anchor.

    An anchor defined there may be used by an alias elsewhere, and a flow mapping or a value
    spanning lines has no line to delete without re-rendering the YAML.
    """
    first = changes.line_start(key.start_mark.index)
    last = key.end_mark.index if _empty(value) else value.end_mark.index
    newline = changes.text.find("\n", last)
    stop = len(changes.text) if newline == -1 else newline + 1
    if (
        key.anchor is None
        and value.anchor is None
        and not changes.text[first : key.start_mark.index].strip()
        and "\n" not in changes.text[key.start_mark.index : last]
        and changes.untouched(first, stop)
    ):
        changes.replace("NM808", first, stop, "")
        changes.note("NM808", key.start_mark.index, f"removed {name}: {why}")
    else:
        changes.todo("NM808", key.start_mark.index, f"{name}: {why}; remove it")


def _entries(node: Node, name: str) -> list[tuple[ScalarNode, Node, MappingNode]]:
    """Every `name: value` entry at any depth (e.g. under `model_init_kwargs`), with its mapping."""
    found: list[tuple[ScalarNode, Node, MappingNode]] = []
    if type(node) is MappingNode:
        for key, value in node.value:
            if type(key) is ScalarNode and key.value == name:
                found.append((key, value, node))
            else:
                found.extend(_entries(value, name))
    elif type(node) is SequenceNode:
        for item in node.value:
            found.extend(_entries(item, name))
    return found


def _attn_values(node: Node) -> list[ScalarNode]:
    """Every `attn_implementation: flash...` value, at any depth (e.g. `model_init_kwargs`)."""
    return [
        value
        for _, value, _ in _entries(node, "attn_implementation")
        if type(value) is ScalarNode and "flash" in value.value and value.value != "sdpa"
    ]
