"""NM212, NM928: Hub kernels (`kernels.get_kernel`, transformers' `use_kernels` and `KernelConfig`).

docs/gaps.md#kernels. On Neuron a Hub kernel loads only from a `build/torch-neuron/` build, which
the CUDA repos scripts name do not have (`migrate/kernel_repos.py`):

- `get_kernel("<repo>")` of a repo known to be CUDA-only gets the NM928 TODO naming the PyTorch op
  to use instead (the shim's `kernels` patch raises the same words at the call);
- `use_kernels=True` is kept, with a report note: the shim drops it where no Neuron kernels are
  mapped, and it is what loads a Neuron mapping where one is;
- `KernelConfig({...})` entries are kept; NM212 adds a `"neuron"` entry to the layers for which the
  user named a Neuron kernel repo (`[tool.neuron-migrate] neuron-kernels`, `--neuron-kernel`), and
  notes a mapping that gives Neuron no kernel. No CUDA repo is ever mapped to a Neuron one by
  guess: no maintained list of Neuron equivalents exists.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.kernel_repos import known_cuda_only, todo_message
from migrate.registry import Rule
from migrate.rules.base import argument, kwarg, on, string_value
from migrate.rules.todo_catalogue import todo

NEURON = "neuron"
_GET_KERNEL = frozenset(
    {"kernels.get_kernel", "kernels.load.get_kernel", "transformers.integrations.hub_kernels.get_kernel"}
)
_KERNEL_CONFIG = frozenset(
    {"transformers.KernelConfig", "transformers.utils.KernelConfig", "transformers.utils.kernel_config.KernelConfig"}
)
USE_KERNELS_NOTE = (
    'use_kernels=True kept: on Neuron it loads only layers mapped to a Neuron kernel (a "neuron" KernelConfig '
    "entry); the neuroncompat shim drops it, with a warning, where none is mapped"
)

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM212",
        name="kernel-config-neuron",
        safety="unsafe",
        safety_reason="on Neuron the named kernel replaces the layer's forward (it kept its own forward before): "
        "numerics can differ slightly",
        summary='`KernelConfig` mappings get a `"neuron"` entry for each layer `[tool.neuron-migrate] '
        "neuron-kernels` (or `--neuron-kernel LAYER=REPO`) names; `use_kernels=True` is kept with a note.",
        rationale="transformers' `KernelConfig` maps layers to Hub kernel repos per device; on Neuron an entry "
        "without a `neuron` key (or a device-less one naming a CUDA repo) keeps the original layer. Only the user "
        "can name a Neuron kernel repo (`build/torch-neuron/`, NKI), so the rule adds one where configured: to a "
        'device dict as `"neuron": "<repo>"`, and a device-less entry becomes `{"cuda": <entry>, "neuron": '
        '"<repo>"}` (add `"rocm"`/`"xpu"` keys by hand if those ran it). Without the option nothing is rewritten '
        "and the report notes the layers Neuron keeps.",
        before="from transformers import KernelConfig\n"
        'config = KernelConfig({"RMSNorm": "kernels-community/layer_norm:LlamaRMSNorm"})\n',
        after="from transformers import KernelConfig\n"
        'config = KernelConfig({"RMSNorm": {"cuda": "kernels-community/layer_norm:LlamaRMSNorm", '
        '"neuron": "acme/rmsnorm-nki:NeuronRMSNorm"}})\n',
    ),
)
# The configuration the NM212 example assumes (tests/migrate/test_rules.py passes it).
EXAMPLE_KERNELS = {"RMSNorm": "acme/rmsnorm-nki:NeuronRMSNorm"}


@on("Call", "NM212", "NM928")
def hub_kernel_call(node: cst.Call, ctx: FileContext) -> cst.Call:
    qualified = ctx.qualify(node.func) or ""
    if qualified in _GET_KERNEL:
        repo = argument(node, 0, "kernel_name" if qualified.startswith("transformers.") else "repo_id")
        repo_id = string_value(repo.value) if repo is not None else None
        if repo_id is not None and known_cuda_only(repo_id):
            todo(ctx, "NM928", todo_message(repo_id))
        return node
    if qualified in _KERNEL_CONFIG:
        return _kernel_config(node, ctx)
    use = kwarg(node, "use_kernels")
    if use is not None and type(use.value) is cst.Name and use.value.value == "True" and ctx.enabled("NM212"):
        ctx.warn("NM212", USE_KERNELS_NOTE)
    return node


def _kernel_config(node: cst.Call, ctx: FileContext) -> cst.Call:
    """Add the configured `"neuron"` entries to a literal `KernelConfig` mapping; note one without any."""
    arg = argument(node, 0, "kernel_mapping")
    if arg is None or type(arg.value) is not cst.Dict or not ctx.enabled("NM212"):
        return node
    mapping = arg.value
    elements = list(mapping.elements)
    changed = False
    without: list[str] = []
    for index, element in enumerate(elements):
        layer = string_value(element.key) if type(element) is cst.DictElement else None
        if layer is None or type(element) is not cst.DictElement:
            continue
        if _has_neuron(element.value):
            continue
        repo = ctx.neuron_kernels.get(layer)
        if repo is None:
            without.append(layer)
            continue
        elements[index] = element.with_changes(value=_with_neuron(element.value, repo, element.key))
        changed = True
    if without:
        ctx.warn(
            "NM212",
            f"KernelConfig maps no Neuron kernel for {', '.join(without)}: on Neuron those layers keep their own "
            "forward; name a Neuron kernel repo per layer in [tool.neuron-migrate] neuron-kernels to add one",
        )
    if not changed:
        return node
    ctx.hit("NM212")
    new_arg = arg.with_changes(value=mapping.with_changes(elements=elements))
    return node.with_changes(args=[new_arg if a is arg else a for a in node.args])


def _has_neuron(value: cst.BaseExpression) -> bool:
    return type(value) is cst.Dict and any(
        type(e) is cst.DictElement and string_value(e.key) == NEURON for e in value.elements
    )


def _quoted(text: str, like: cst.BaseExpression) -> cst.SimpleString:
    quote = "'" if type(like) is cst.SimpleString and like.value.startswith("'") else '"'
    return cst.SimpleString(f"{quote}{text}{quote}")


def _with_neuron(value: cst.BaseExpression, repo: str, key: cst.BaseExpression) -> cst.BaseExpression:
    """A device dict with `"neuron": repo` appended, or a device-less entry as `{"cuda": entry, "neuron": repo}`."""
    entry = cst.DictElement(_quoted(NEURON, key), _quoted(repo, key))
    if type(value) is cst.Dict and value.elements:
        elements = list(value.elements)
        last = elements[-1]
        if not isinstance(last.comma, cst.MaybeSentinel):  # a trailing comma: the new entry takes it,
            separator = elements[-2].comma if len(elements) > 1 else cst.MaybeSentinel.DEFAULT
            elements[-1] = last.with_changes(comma=separator)  # and the old last one the separator before it
            entry = entry.with_changes(comma=last.comma)
        return value.with_changes(elements=[*elements, entry])
    return cst.Dict([cst.DictElement(_quoted("cuda", key), value), entry])
