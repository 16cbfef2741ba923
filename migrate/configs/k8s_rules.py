"""NM828-NM829 and the launch-line rules in Kubernetes manifests (PyTorchJob, Job, Deployment, ...).

A YAML document is a manifest when it has `apiVersion` and `kind`; every document of a
multi-document file is looked at. Edits are spliced into the original text like the other YAML
rules (`yaml_rules`), so comments, key order, quoting and anchors stay; an anchored node is never
edited (its alias elsewhere would change too).

A container's command line (`command` plus `args` lists, or one script string such as
`bash -c "torchrun ..."` or a `|` block) is migrated by the shell rules: its words are laid out
as a small shell text with a map back to their characters in the file, the shell rules run on
that text with `cluster=True`, and each edit that falls inside one mapped word is spliced back.
TODOs go above the line where the value starts, never inside a block scalar.
"""

from __future__ import annotations

import re

from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from migrate.configs.cluster_catalog import TODO_TEXT as CLUSTER_TODO
from migrate.configs.edits import Changes
from migrate.configs.k8s_catalog import NEURONCORE, TODO_TEXT

GPU_RESOURCE = "nvidia.com/gpu"
_CUDA_IMAGE = re.compile(r"cuda|nvidia|nvcr\.io|cudnn|-gpu\b|:.*\bgpu", re.I)
_GPU_INSTANCE = re.compile(r"^(?:p[2-6][a-z]*|g[3-6][a-z]*|gr6)\.", re.I)
_INSTANCE_KEYS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
_SCRIPT_SHELLS = frozenset({"bash", "sh", "/bin/bash", "/bin/sh", "/usr/bin/env"})
_SAFE_WORD = re.compile(r"[A-Za-z0-9_./:=,@%+$-]+")


def is_manifest(keys: dict[str, tuple[ScalarNode, Node]]) -> bool:
    """A Kubernetes object: a mapping with `apiVersion` and `kind`."""
    return "apiVersion" in keys and "kind" in keys


def manifest(changes: Changes, doc: MappingNode) -> None:
    """Every rule on one manifest document."""
    for mapping in _mappings(doc):
        for key, value in mapping.value:
            if type(key) is not ScalarNode:
                continue
            if key.value in ("limits", "requests") and type(value) is MappingNode:
                _resources(changes, value)
            elif key.value == "image" and type(value) is ScalarNode and _CUDA_IMAGE.search(value.value):
                changes.todo("NM829", key.start_mark.index, TODO_TEXT["image"].format(image=value.value))
            elif key.value in _INSTANCE_KEYS and type(value) is ScalarNode and _GPU_INSTANCE.match(value.value):
                changes.todo("NM829", key.start_mark.index, TODO_TEXT["instance"].format(value=value.value))
            elif key.value.startswith("nvidia.com/gpu.") and type(value) is ScalarNode:
                changes.todo("NM829", key.start_mark.index, TODO_TEXT["label"].format(label=key.value))
            elif key.value == "key" and type(value) is ScalarNode and value.value == GPU_RESOURCE:
                changes.todo("NM829", mapping.start_mark.index, TODO_TEXT["toleration"])
            elif key.value == "env" and type(value) is SequenceNode:
                _env(changes, value)
        _container_command(changes, mapping)


def _mappings(node: Node) -> list[MappingNode]:
    """Every mapping at any depth, outermost first."""
    found: list[MappingNode] = []
    if type(node) is MappingNode:
        found.append(node)
        for _, value in node.value:
            found.extend(_mappings(value))
    elif type(node) is SequenceNode:
        for item in node.value:
            found.extend(_mappings(item))
    return found


def _resources(changes: Changes, mapping: MappingNode) -> None:
    """NM828: `nvidia.com/gpu: N` -> `aws.amazon.com/neuroncore: N`, with the counts explained."""
    names = {k.value for k, _ in mapping.value if type(k) is ScalarNode}
    for key, value in mapping.value:
        if type(key) is not ScalarNode or key.value != GPU_RESOURCE or key.anchor is not None:
            continue
        count = value.value if type(value) is ScalarNode else "N"
        if NEURONCORE in names or not changes.enabled("NM828"):
            changes.todo("NM828", key.start_mark.index, TODO_TEXT["both"])
            continue
        start, end = key.start_mark.index, key.end_mark.index
        if key.style in ("'", '"'):
            start, end = start + 1, end - 1
        changes.replace("NM828", start, end, NEURONCORE)
        changes.todo("NM828", key.start_mark.index, TODO_TEXT["resource"].format(count=count))


def _env(changes: Changes, items: SequenceNode) -> None:
    """NM822-NM826 on `env: [{name: ..., value: ...}]` entries."""
    for item in items.value:
        if type(item) is not MappingNode:
            continue
        entry = {k.value: v for k, v in item.value if type(k) is ScalarNode}
        name = entry.get("name")
        if type(name) is not ScalarNode:
            continue
        value = entry.get("value")
        shown = value.value if type(value) is ScalarNode else "..."
        at = item.start_mark.index
        if name.value.startswith("NCCL_"):
            changes.todo("NM822", at, CLUSTER_TODO["NM822"].format(names=name.value))
        elif name.value == "CUDA_VISIBLE_DEVICES":
            changes.todo("NM828", at, TODO_TEXT["visible"])
        elif name.value == "NEURON_COMPILE_CACHE_URL":
            if type(value) is ScalarNode and "://" not in shown and name.anchor is None and changes.enabled("NM824"):
                start, end = name.start_mark.index, name.end_mark.index
                if name.style in ("'", '"'):
                    start, end = start + 1, end - 1
                changes.replace("NM824", start, end, "TORCH_NEURONX_NEFF_CACHE_DIR")
            else:
                changes.todo(
                    "NM824", at, CLUSTER_TODO["NM824"].format(name=name.value, value=shown, what="a remote cache")
                )
        elif name.value == "CUSTOM_CACHE_REPO":
            changes.todo(
                "NM824", at, CLUSTER_TODO["NM824"].format(name=name.value, value=shown, what="a Hub repository")
            )
        elif name.value == "NEURON_CC_FLAGS":
            changes.todo("NM823", at, CLUSTER_TODO["NM823"].replace("is computed at run time", "is set here"))
        elif name.value in ("NEURON_PARALLEL_COMPILE", "NEURON_EXTRACT_GRAPHS_ONLY"):
            changes.todo("NM825", at, CLUSTER_TODO["NM825"].format(name=name.value))
        elif name.value in ("XLA_USE_BF16", "XLA_DOWNCAST_BF16"):
            changes.todo("NM826", at, CLUSTER_TODO["NM826"].format(name=name.value))


class _Text:
    """A shell text built from YAML scalars, with the file offset of each of its characters (-1: none).

    `items` holds, for a text laid out from a sequence, each item's (start, end) in the text and
    the file span that deletes the item (its line in a block sequence, its comma in a flow one).
    """

    def __init__(self) -> None:
        self.text = ""
        self.where: list[int] = []
        self.items: list[tuple[int, int, tuple[int, int] | None]] = []

    def add(self, text: str, where: list[int]) -> None:
        self.text += text
        self.where += where

    def span(self, start: int, end: int) -> tuple[int, int] | None:
        """The file span of `text[start:end]`, when it is one run of mapped characters."""
        if start == end:
            at = self.where[start] if start < len(self.where) else -1
            return (at, at) if at >= 0 else None
        inside = self.where[start:end]
        if -1 in inside or inside != list(range(inside[0], inside[0] + len(inside))):
            return None
        return inside[0], inside[-1] + 1

    def deletion(self, start: int, end: int) -> list[tuple[int, int]] | None:
        """The file spans deleting whole items, when `text[start:end]` is exactly items and their separators."""
        covered = [item for item in self.items if start <= item[0] and item[1] <= end]
        if not covered or any(delete is None for _, _, delete in covered):
            return None
        rest = [c for i, c in enumerate(self.text[start:end], start) if not any(a <= i < b for a, b, _ in covered)]
        return [delete for _, _, delete in covered] if not "".join(rest).strip() else None  # type: ignore[misc]


def _scalar_text(changes: Changes, node: ScalarNode) -> tuple[str, list[int]] | None:
    """The scalar's value with the file offset of each character; None when they cannot be mapped."""
    start, end = node.start_mark.index, node.end_mark.index
    raw = changes.text[start:end]
    if node.style is None and "\n" not in raw:
        return (node.value, list(range(start, start + len(node.value)))) if raw == node.value else None
    if node.style in ("'", '"') and raw[1:-1] == node.value:
        return node.value, list(range(start + 1, start + 1 + len(node.value)))
    if node.style == "|":
        where: list[int] = []
        body = raw.find("\n") + 1
        lines = changes.text[start + body : end].split("\n")
        indent = min((len(line) - len(line.lstrip(" ")) for line in lines if line.strip()), default=0)
        offset, text = start + body, ""
        for line in lines:
            content = line[indent:]
            text += content + "\n"
            where += list(range(offset + indent, offset + indent + len(content))) + [offset + len(line)]
            offset += len(line) + 1
        text, where = text[: len(node.value)], where[: len(node.value)]
        return (text, where) if text == node.value else None
    return None


def _container_command(changes: Changes, container: MappingNode) -> None:
    """The shell rules on a container's `command`/`args`, spliced back into the manifest."""
    entries = {k.value: (k, v) for k, v in container.value if type(k) is ScalarNode}
    parts = [entries[name] for name in ("command", "args") if name in entries]
    if not parts:
        return
    anchor = parts[0][0].start_mark.index
    items: list[ScalarNode] = []
    for _, value in parts:
        if type(value) is ScalarNode:
            _script(changes, value, value.start_mark.index)
        elif type(value) is SequenceNode:
            items += [item for item in value.value if type(item) is ScalarNode]
    if not items:
        return
    first = items[0].value
    if first in _SCRIPT_SHELLS or first.endswith("/bash"):
        for item in items[1:]:
            if not item.value.startswith("-"):
                _script(changes, item, item.start_mark.index)
        return
    text = _Text()
    for i, item in enumerate(items):
        mapped = _scalar_text(changes, item)
        if mapped is None or not _SAFE_WORD.fullmatch(item.value):
            text.add("_", [-1])
        else:
            start = len(text.text)
            text.add(*mapped)
            text.items.append((start, len(text.text), _item_deletion(changes, items, i)))
        text.add(" ", [-1])
    _run_shell(changes, text, anchor)


def _item_deletion(changes: Changes, items: list[ScalarNode], i: int) -> tuple[int, int] | None:
    """The span that removes `items[i]` from its sequence: its `- item` line, or `, item` in a flow list."""
    item = items[i]
    start, end = item.start_mark.index, item.end_mark.index
    line = changes.line_start(start)
    if changes.text[line:start].strip() == "-" and changes.line_end(end) == changes.text.find("\n", end) - (
        changes.text[changes.text.find("\n", end) - 1] == "\r"
    ):
        after = changes.text.find("\n", end)
        return line, after + 1
    before = changes.text.rfind(",", 0, start)
    if i > 0 and before > items[i - 1].end_mark.index - 1 and not changes.text[before + 1 : start].strip():
        return before, end
    return None


def _script(changes: Changes, node: ScalarNode, anchor: int) -> None:
    """One scalar holding a shell script (`bash -c "..."`, a `|` block, a `command:` string)."""
    if node.anchor is not None or not re.search(r"torchrun|python|srun|NCCL_|NEURON_", node.value):
        return
    mapped = _scalar_text(changes, node)
    if mapped is None:
        return
    text = _Text()
    text.add(*mapped)
    _run_shell(changes, text, anchor)


def _run_shell(changes: Changes, text: _Text, anchor: int) -> None:
    from migrate.configs.shell_rules import shell_rules

    inner = Changes(text.text, changes.selection)
    shell_rules(inner, cluster=True)
    for edit in inner.edits:
        span = text.span(edit.start, edit.end)
        deletion = text.deletion(edit.start, edit.end) if edit.text == "" and span is None else None
        if span is not None and changes.untouched(*span):
            changes.replace(edit.rule, span[0], span[1], edit.text, anchor=anchor)
        elif deletion and all(changes.untouched(*d) for d in deletion):
            for start, end in deletion:
                changes.replace(edit.rule, start, end, "", anchor=anchor)
        elif edit.text == "":
            changes.todo(edit.rule, anchor, f"remove {text.text[edit.start : edit.end].strip()} from this command line")
    for _, rule, message in inner.todos:
        changes.todo(rule, anchor, message)
    for _, finding in inner.remarks:
        changes.note(finding.rule, anchor, finding.message)
