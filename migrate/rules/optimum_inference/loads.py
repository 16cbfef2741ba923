"""NM511-NM515 Optimum Neuron inference -> transformers models and pipelines on the neuron device.

docs/gaps.md (Optimum Neuron facts) and docs/rules.md (NM511-NM515). Optimum compiled a model ahead of time for
fixed shapes (`export=True, batch_size=, sequence_length=` up to 0.3; `get_neuron_config()` +
`export()` in 0.4.x) and ran it from the CPU side. TorchNeuron compiles on first use: the
native model is loaded onto the NeuronCore with `device_map="neuron"` in bf16 (the NxD
default), the export kwargs go, and the export shapes survive as what keeps graphs static: a
static KV cache of `max_cache_len = sequence_length` for decoders, inputs padded to
`sequence_length` for encoders. Decoder inputs stay on CPU (`generate()` moves them); encoder
inputs move to the model's device, since a native forward does not take CPU tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    HookResult,
    add_kwarg,
    argument,
    assignment,
    code,
    family_state,
    has_star_kwargs,
    kwarg,
    last_name,
    may_add,
    method_of,
    on,
    remove_arg,
    string_value,
    wrap_long,
)
from migrate.rules.legacy_names import is_legacy, resolve, swap
from migrate.rules.removal import Removal, removable
from migrate.rules.todo_catalogue import TP_LAUNCH, flatten, todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM511",
        name="neuron-model-classes",
        safety="unsafe",
        safety_reason="export shapes and compiler options are dropped; the model runs in the export dtype on `neuron`",
        summary='Inference `NeuronModelForXxx.from_pretrained(..., export=True, ...)` -> `AutoModelForXxx` on `device_map="neuron"` in bf16.',
        rationale="Every traced or NxD Optimum model class has a transformers auto class that loads "
        "the same checkpoint; TorchNeuron compiles it on first use, so `export`, the export shapes "
        "and the compiler arguments (`num_cores`, `auto_cast`, `optlevel`, ...) are dropped. The "
        "dtype follows `auto_cast_type` (bf16 unless fp32 was asked for). A model split over "
        "`num_cores`/`tensor_parallel_size` > 1 runs however it is launched: under torchrun "
        "`distributed_config=DistributedConfig(tp_size=<WORLD_SIZE>)` shards it over the processes (one per "
        'core; the mesh must be the world size), under plain `python` it loads whole on `device_map="neuron"`; '
        "TODO NM917 says how to launch it over N cores. Resolved by import path: "
        "the training `NeuronModelForCausalLM` is NM506's.",
        before="import torch\nfrom optimum.neuron import NeuronModelForSequenceClassification\n"
        'model = NeuronModelForSequenceClassification.from_pretrained(model_id, export=True, auto_cast="matmul")\n',
        after="import torch\nfrom transformers import AutoModelForSequenceClassification\n"
        'model = AutoModelForSequenceClassification.from_pretrained(\n    model_id,\n    device_map="neuron",\n'
        "    dtype=torch.bfloat16,\n)\n",
    ),
    Rule(
        id="NM512",
        name="export-shapes",
        safety="safe",
        summary="Export shapes stay static: decoders get a static cache of `max_cache_len = sequence_length`.",
        rationale="`sequence_length` bounded prompt plus generated tokens of a compiled decoder; a "
        "static KV cache of that length keeps one decode graph (transformers compiles it for the "
        '`neuron` backend). `model.neuron_config.batch_size` / `model.config.neuron["batch_size"]` '
        "and the other export values read later become the values of the export call.",
        before="from optimum.neuron import NeuronModelForCausalLM\n"
        "model = NeuronModelForCausalLM.from_pretrained(model_id, export=True, batch_size=1, sequence_length=1024)\n"
        "n = model.neuron_config.batch_size\n",
        after="from optimum.neuron import NeuronModelForCausalLM\n"
        "model = NeuronModelForCausalLM.from_pretrained(model_id, export=True, batch_size=1, sequence_length=1024)\n"
        'model.generation_config.cache_implementation = "static"\nmodel.generation_config.max_cache_len = 1024\n'
        "n = 1\n",
    ),
    Rule(
        id="NM513",
        name="neuron-export-api",
        safety="unsafe",
        safety_reason="export shapes and compiler options are dropped; the model is loaded natively instead",
        summary="0.4.x `get_neuron_config(...)` + `export(...)` -> `AutoModelForCausalLM.from_pretrained(...)`.",
        rationale="From 0.4 Optimum decoders are exported with `cfg = NeuronModelForCausalLM."
        "get_neuron_config(id, batch_size=, sequence_length=, tensor_parallel_size=)` and "
        "`NeuronModelForCausalLM.export(id, neuron_config=cfg, load_weights=True)`. Natively the "
        "model is loaded from the same id; the config's shapes feed NM512 and the config "
        "statement goes once nothing else reads it.",
        before="from optimum.neuron import NeuronModelForCausalLM\n"
        "cfg = NeuronModelForCausalLM.get_neuron_config(model_id, batch_size=1, sequence_length=512)\n"
        "model = NeuronModelForCausalLM.export(model_id, neuron_config=cfg, load_weights=True)\n",
        after="from optimum.neuron import NeuronModelForCausalLM\n"
        "model = NeuronModelForCausalLM.from_pretrained(model_id)\n",
    ),
    Rule(
        id="NM514",
        name="encoder-inputs",
        safety="unsafe",
        safety_reason="inputs are padded to the export length, so per-token outputs have that length, on the device",
        summary="Encoder inputs are padded to the export `sequence_length` and moved to the model's device.",
        rationale="Optimum padded inputs of traced encoders to the compiled shape and took CPU "
        'tensors. Natively `tokenizer(..., padding="max_length", max_length=sequence_length, '
        "truncation=True)` keeps one graph, and the batch has to be on the model's device "
        "(`.to(model.device)`); outputs come back on the device.",
        before="from optimum.neuron import NeuronModelForSequenceClassification\n"
        "model = NeuronModelForSequenceClassification.from_pretrained(model_id, export=True, sequence_length=128)\n"
        'inputs = tokenizer(text, return_tensors="pt")\n',
        after="from optimum.neuron import NeuronModelForSequenceClassification\n"
        "model = NeuronModelForSequenceClassification.from_pretrained(model_id, export=True, sequence_length=128)\n"
        'inputs = tokenizer(\n    text,\n    return_tensors="pt",\n    padding="max_length",\n    max_length=128,\n'
        "    truncation=True,\n).to(model.device)\n",
    ),
    Rule(
        id="NM515",
        name="optimum-pipeline",
        safety="unsafe",
        safety_reason="the pipeline's model runs in bf16 on the NeuronCore, without Optimum's export options",
        summary='`optimum.neuron.pipeline(...)` -> `transformers.pipeline(..., device="neuron", dtype=torch.bfloat16)`.',
        rationale='transformers\' pipeline runs on the NeuronCore with `device="neuron"` (without a '
        "device it runs on CPU on Neuron). `export`, `input_shapes`, `compiler_args` and "
        "`num_cores` are dropped; a text-generation pipeline's `sequence_length` becomes its "
        "model's static cache length (NM512).",
        before="import torch\nfrom optimum.neuron import pipeline\n"
        'pipe = pipeline("text-classification", model_id, export=True)\n',
        after="import torch\nfrom transformers import pipeline\n"
        'pipe = pipeline("text-classification", model_id, device="neuron", dtype=torch.bfloat16)\n',
    ),
)

# Optimum inference class -> (auto class, kind); kind decides how the export shapes survive.
_CLASSES: dict[str, tuple[str, str]] = {
    "NeuronModelForCausalLM": ("AutoModelForCausalLM", "decoder"),
    "NeuronModelForSeq2SeqLM": ("AutoModelForSeq2SeqLM", "seq2seq"),
    "NeuronModelForImageTextToText": ("AutoModelForImageTextToText", "seq2seq"),
    "NeuronWhisperForConditionalGeneration": ("AutoModelForSpeechSeq2Seq", "seq2seq"),
    "NeuronModelForFeatureExtraction": ("AutoModel", "encoder"),
    "NeuronModelForEmbedding": ("AutoModel", "encoder"),
    "NeuronBertModel": ("AutoModel", "encoder"),
    "NeuronModelForMaskedLM": ("AutoModelForMaskedLM", "encoder"),
    "NeuronBertForMaskedLM": ("AutoModelForMaskedLM", "encoder"),
    "NeuronModelForQuestionAnswering": ("AutoModelForQuestionAnswering", "encoder"),
    "NeuronBertForQuestionAnswering": ("AutoModelForQuestionAnswering", "encoder"),
    "NeuronModelForSequenceClassification": ("AutoModelForSequenceClassification", "encoder"),
    "NeuronBertForSequenceClassification": ("AutoModelForSequenceClassification", "encoder"),
    "NeuronModelForTokenClassification": ("AutoModelForTokenClassification", "encoder"),
    "NeuronBertForTokenClassification": ("AutoModelForTokenClassification", "encoder"),
    "NeuronModelForMultipleChoice": ("AutoModelForMultipleChoice", "encoder"),
    "NeuronBertForMultipleChoice": ("AutoModelForMultipleChoice", "encoder"),
    "NeuronCLIPModel": ("AutoModel", "vision"),
    "NeuronModelForImageClassification": ("AutoModelForImageClassification", "vision"),
    "NeuronCLIPForImageClassification": ("AutoModelForImageClassification", "vision"),
    "NeuronModelForSemanticSegmentation": ("AutoModelForSemanticSegmentation", "vision"),
    "NeuronModelForObjectDetection": ("AutoModelForObjectDetection", "vision"),
    "NeuronYolosForObjectDetection": ("AutoModelForObjectDetection", "vision"),
    "NeuronModelForCTC": ("AutoModelForCTC", "vision"),
    "NeuronModelForAudioClassification": ("AutoModelForAudioClassification", "vision"),
    "NeuronModelForAudioFrameClassification": ("AutoModelForAudioFrameClassification", "vision"),
    "NeuronModelForXVector": ("AutoModelForAudioXVector", "vision"),
}
for _old, (_auto, _kind) in _CLASSES.items():
    swap(("optimum.neuron",), _old, "transformers", _auto, "NM511")
swap(("optimum.neuron",), "pipeline", "transformers", "pipeline", "NM515")

# Export-time arguments with no meaning for a native model.
_EXPORT_KWARGS = (
    "export",
    "batch_size",
    "sequence_length",
    "num_cores",
    "tensor_parallel_size",
    "auto_cast",
    "auto_cast_type",
    "dynamic_batch_size",
    "inline_weights_to_neff",
    "optlevel",
    "instance_type",
    "disable_neuron_cache",
    "compiler_workdir",
    "compiler_args",
    "input_shapes",
    "num_choices",
    "image_size",
    "num_channels",
    "height",
    "width",
    "audio_sequence_length",
    "num_beams",
    "disable_fallback",
    "disable_fast_relayout",
    "cpu_backend",
    "neuron_config",
    "load_weights",
    "checkpoint_id",
    "checkpoint_revision",
)
_SHAPES = ("batch_size", "sequence_length", "tensor_parallel_size", "num_cores")
_FP32 = ("fp32", "f32", "float32")
_OLD_INSTANCES = ("inf1", "inf2", "trn1", "trn1n")


@dataclass
class _Export:
    """What an export call fixed: shapes, tensor-parallel degree, precision."""

    shapes: dict[str, cst.BaseExpression] = field(default_factory=dict)
    fp32: bool = False
    compiled: bool = False  # True when the call compiles from a checkpoint (export=True, export())

    @property
    def tp(self) -> cst.BaseExpression | None:
        value = self.shapes.get("tensor_parallel_size") or self.shapes.get("num_cores")
        if value is None or (type(value) is cst.Integer and value.value == "1"):
            return None
        return value


@dataclass
class _State:
    configs: dict[str, _Export] = field(default_factory=dict)  # get_neuron_config() results by name
    models: dict[str, _Export] = field(default_factory=dict)  # model variable -> its export
    pending: tuple[_Export, str] | None = None  # (export, kind) of the load in the current statement
    encoder: tuple[str, _Export] | None = None  # encoder model variable and its export
    dicts: dict[str, cst.Dict] = field(default_factory=dict)  # `name = {"key": value, ...}` seen so far
    # those splatted into an Optimum call and inlined there -> the rule credited when the dict goes
    inlined: dict[str, str] = field(default_factory=dict)


def _state(ctx: FileContext) -> _State:
    return family_state(ctx, "optimum-inference", _State)


def _read_export(call: cst.Call, into: _Export, ctx: FileContext) -> _Export:
    """Collect shapes and precision from export kwargs (and an inline `input_shapes={...}`)."""
    for arg in call.args:
        if arg.keyword is None:
            continue
        name = arg.keyword.value
        if name in _SHAPES:
            into.shapes[name] = arg.value
        elif name in ("input_shapes", "compiler_args") and type(arg.value) is cst.Dict:
            for element in arg.value.elements:
                if type(element) is cst.DictElement and string_value(element.key) in _SHAPES:
                    into.shapes[string_value(element.key)] = element.value  # type: ignore[index]
                elif type(element) is cst.DictElement and string_value(element.key) == "auto_cast_type":
                    into.fp32 = string_value(element.value) in _FP32
        elif name == "auto_cast_type":
            into.fp32 = string_value(arg.value) in _FP32
        elif name == "auto_cast" and string_value(arg.value) == "none":
            into.fp32 = True
        elif name == "export" and not (type(arg.value) is cst.Name and arg.value.value == "False"):
            into.compiled = True
        elif name == "instance_type" and (string_value(arg.value) or "") in _OLD_INSTANCES:
            todo(ctx, "NM913")
    return into


def _native_load(call: cst.Call, export: _Export, ctx: FileContext, rule_id: str, pipeline: bool = False) -> cst.Call:
    """Drop the export kwargs; add the device (or the TP config) and the dtype.

    A pipeline keeps `batch_size` (also a transformers pipeline argument) and names its
    device with `device=`; it cannot take a `DistributedConfig`, so TP is only a TODO there.
    """
    dropped = [
        a.keyword.value
        for a in call.args
        if a.keyword is not None
        and a.keyword.value in _EXPORT_KWARGS
        and not (pipeline and a.keyword.value == "batch_size")
    ]
    for name in dropped:
        arg = kwarg(call, name)
        assert arg is not None
        call = remove_arg(call, arg)
    if dropped:
        ctx.warn(rule_id, f"dropped export arguments {', '.join(dropped)}: TorchNeuron compiles on first use")
    if export.tp is not None:
        todo(ctx, "NM917", TP_LAUNCH.format(cores=code(export.tp)))
    if export.tp is not None and not pipeline:
        if may_add(call, "distributed_config") and may_add(call, "device_map"):
            # however it is launched: `python` runs the whole model on one core, torchrun shards it over its
            # processes (DistributedConfig's mesh must be the world size: tp_size=N alone fails under `python`)
            config = ctx.name_ref("transformers.distributed", "DistributedConfig")
            world = f'int({code(ctx.module_ref("os"))}.environ.get("WORLD_SIZE", 1))'
            call = add_kwarg(call, "distributed_config", f"{config}(tp_size={world}) if {world} > 1 else None")
            call = add_kwarg(call, "device_map", f'None if {world} > 1 else "neuron"')
    elif kwarg(call, "device_map") is None and kwarg(call, "device") is None and not has_star_kwargs(call):
        call = add_kwarg(call, "device" if pipeline else "device_map", '"neuron"')
    if kwarg(call, "dtype") is None and kwarg(call, "torch_dtype") is None and not has_star_kwargs(call):
        torch = code(ctx.module_ref("torch"))
        call = add_kwarg(call, "dtype", f"{torch}.float32" if export.fp32 else f"{torch}.bfloat16")
    ctx.hit(rule_id)
    return wrap_long(call)


def _model_class(node: cst.BaseExpression, ctx: FileContext) -> str | None:
    """The Optimum inference class `node` names (resolved by import path), or None."""
    qualified = ctx.qualify(node)
    found = resolve(qualified)
    if found is None or found.rule_id != "NM511":
        return None
    return qualified.rpartition(".")[2]  # type: ignore[union-attr]


def _from_pretrained(node: cst.Call, name: str, ctx: FileContext) -> cst.Call:
    export = _read_export(node, _Export(), ctx)
    if not export.compiled:
        todo(ctx, "NM915")
    _state(ctx).pending = (export, _CLASSES[name][1])
    if not ctx.enabled("NM511"):
        return node
    return _native_load(node, export, ctx, "NM511")


def _export(node: cst.Call, name: str, ctx: FileContext) -> cst.Call:
    """0.4.x `X.export(model_id, neuron_config=cfg, ...)` -> `X.from_pretrained(model_id, ...)`."""
    export = _Export(compiled=True)
    config = kwarg(node, "neuron_config")
    if config is not None:
        if type(config.value) is cst.Name and config.value.value in _state(ctx).configs:
            export.shapes.update(_state(ctx).configs[config.value.value].shapes)
        elif type(config.value) is cst.Call:
            _read_export(config.value, export, ctx)
    _read_export(node, export, ctx)
    _state(ctx).pending = (export, _CLASSES[name][1])
    if not ctx.enabled("NM513"):
        return node
    assert type(node.func) is cst.Attribute
    node = node.with_changes(func=node.func.with_changes(attr=cst.Name("from_pretrained")))
    node = _native_load(node, export, ctx, "NM513") if ctx.enabled("NM511") else _drop_export_kwargs(node)
    ctx.hit("NM513")
    return node


def _drop_export_kwargs(node: cst.Call) -> cst.Call:
    for name in ("neuron_config", "load_weights"):
        arg = kwarg(node, name)
        if arg is not None:
            node = remove_arg(node, arg)
    return node


def _pipeline(node: cst.Call, ctx: FileContext) -> cst.Call:
    export = _read_export(node, _Export(), ctx)
    task_arg = argument(node, 0, "task")
    model_arg = argument(node, 1, "model")
    by_name = model_arg is not None and (
        type(model_arg.value) is cst.SimpleString or type(model_arg.value) in (cst.Name, cst.Attribute)
    )
    if by_name and not export.compiled:
        todo(ctx, "NM915")
    if task_arg is not None and string_value(task_arg.value) == "text-generation":
        _state(ctx).pending = (export, "pipeline")
    if not ctx.enabled("NM515"):
        return node
    return _native_load(node, export, ctx, "NM515", pipeline=True)


def inline_splats(node: cst.Call, ctx: FileContext, rule_id: str = "NM511") -> cst.Call:
    """`X.from_pretrained(id, **compiler_args, **input_shapes)` with both dicts built in the file:
    their entries become keywords, so the export arguments among them are read and dropped like
    literal ones (a splatted `num_cores` is a TypeError for a transformers model). `rule_id` is the rule
    credited when a dict statement goes once inlined (NM531 for the diffusion pipelines, which share this)."""
    state = _state(ctx)
    args: list[cst.Arg] = []
    for arg in node.args:
        name = arg.value.value if arg.star == "**" and type(arg.value) is cst.Name else None
        if name is None or name not in state.dicts:
            args.append(arg)
            continue
        state.inlined[name] = rule_id
        for element in state.dicts[name].elements:
            assert type(element) is cst.DictElement
            args.append(
                cst.Arg(
                    keyword=cst.Name(string_value(element.key)),  # type: ignore[arg-type]
                    value=element.value,
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                    comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                )
            )
    if len(args) == len(node.args) and all(a is b for a, b in zip(args, node.args)):
        return node
    args[-1] = args[-1].with_changes(comma=node.args[-1].comma, whitespace_after_arg=node.args[-1].whitespace_after_arg)
    return node.with_changes(args=args)


@on("Assign")
def keyword_dicts(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Remember `compiler_args = {"num_cores": 2, ...}`: string-keyed dicts a later call may splat."""
    if len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
        name, value = node.targets[0].target.value, node.value
        state = _state(ctx)
        if (
            type(value) is cst.Dict
            and value.elements
            and all(type(e) is cst.DictElement and (string_value(e.key) or "").isidentifier() for e in value.elements)
        ):
            state.dicts[name] = value
        else:
            state.dicts.pop(name, None)
    return node


@removable
def inlined_dict(stmt: cst.BaseStatement, ctx: FileContext) -> Removal | None:
    """A keyword dict whose entries were inlined into the Optimum call goes once nothing else reads it."""
    bound = assignment(stmt)
    if bound is not None and type(bound[1]) is cst.Dict and bound[0] in _state(ctx).inlined:
        return Removal(_state(ctx).inlined[bound[0]], binds=bound[0])
    return None


@on("Call", "NM511", "NM513", "NM515", "NM913", "NM915", "NM917", "NM919")
def optimum_inference_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    func = node.func
    if type(func) is cst.Attribute:
        name = _model_class(func.value, ctx)
        if name is not None:
            if ctx.enabled("NM511"):
                node = inline_splats(node, ctx)
            method = func.attr.value
            if method == "from_pretrained":
                return _from_pretrained(node, name, ctx)
            if method == "export":
                return _export(node, name, ctx)
            if method == "get_neuron_config":
                _read_export(node, _Export(), ctx)
                return node
    qualified = ctx.qualify(func)
    found = resolve(qualified)
    if found is not None and found.rule_id == "NM515":
        return _pipeline(node, ctx)
    if is_legacy(qualified) and qualified.startswith("optimum.") and found is None:  # type: ignore[union-attr]
        base = resolve(qualified.rpartition(".")[0])  # type: ignore[union-attr]
        if base is None:
            todo(ctx, "NM919")
    return node


@on("Assign", "NM511", "NM514", "NM913")
def bind_models(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Remember which variable holds which export (for NM512/NM514), and `get_neuron_config` results."""
    if len(node.targets) != 1:
        return node
    target = node.targets[0].target
    value = node.value
    state = _state(ctx)
    if type(target) is cst.Name and type(value) is cst.Call and method_of(value, "get_neuron_config"):
        assert type(value.func) is cst.Attribute
        if _model_class(value.func.value, ctx) is not None:
            state.configs[target.value] = _read_export(value, _Export(), ctx)
        return node
    if state.pending is not None and type(value) is cst.Call:
        export, kind = state.pending
        known = state.models.setdefault(code(target), _Export())
        known.shapes.update(export.shapes)  # a load from an exported directory knows no shapes itself
        if kind == "encoder":
            state.encoder = (code(target), export)
        return node
    if state.encoder is not None and ctx.enabled("NM514"):
        return _encoder_inputs(node, ctx, *state.encoder)
    return node


def _encoder_inputs(node: cst.Assign, ctx: FileContext, model: str, export: _Export) -> cst.Assign:
    value = node.value
    moved = type(value) is cst.Call and method_of(value, "to")
    call = value.func.value if moved else value  # type: ignore[attr-defined]
    if type(call) is not cst.Call or kwarg(call, "return_tensors") is None:
        return node
    if not (last_name(call.func) or "").lower().endswith(("tokenizer", "tok")):
        return node
    new = call
    length = export.shapes.get("sequence_length")
    padding = kwarg(new, "padding")
    if length is not None and not has_star_kwargs(new):
        if padding is None:
            new = add_kwarg(new, "padding", '"max_length"')
        elif string_value(padding.value) != "max_length":
            new = new.with_changes(
                args=[
                    a if a is not padding else a.with_changes(value=cst.SimpleString('"max_length"')) for a in new.args
                ]
            )
        if kwarg(new, "max_length") is None:
            new = add_kwarg(new, "max_length", code(length))
        if kwarg(new, "truncation") is None:
            new = add_kwarg(new, "truncation", "True")
    if moved:
        if new is call:
            return node
        ctx.hit("NM514")
        return node.with_changes(value=value.with_changes(func=value.func.with_changes(value=wrap_long(new))))  # type: ignore[attr-defined]
    ctx.hit("NM514")
    moved_call = cst.parse_expression(f"x.to({model}.device)")
    assert type(moved_call) is cst.Call and type(moved_call.func) is cst.Attribute
    return node.with_changes(value=moved_call.with_changes(func=moved_call.func.with_changes(value=wrap_long(new))))


@on("SimpleStatementLine", "NM512")
def static_cache(node: cst.SimpleStatementLine, ctx: FileContext) -> HookResult:
    """After `model = <decoder load>`, fix the cache to the export's `sequence_length`."""
    state = _state(ctx)
    if state.pending is None:
        return node
    export, kind = state.pending
    state.pending = None
    length = export.shapes.get("sequence_length")
    small = node.body[0] if len(node.body) == 1 else None
    if (
        kind not in ("decoder", "pipeline")
        or length is None
        or type(small) is not cst.Assign
        or not ctx.enabled("NM512")
    ):
        return node
    target = code(small.targets[0].target)
    owner = f"{target}.model" if kind == "pipeline" else target
    if f"{owner}.generation_config.max_cache_len" in ctx.text:
        return node  # set by hand or by an earlier run
    lines = [
        cst.parse_statement(f'{owner}.generation_config.cache_implementation = "static"'),
        cst.parse_statement(f"{owner}.generation_config.max_cache_len = {code(length)}"),
    ]
    ctx.hit("NM512")
    return flatten(ctx, [node, *lines])


_SHAPE_ATTRIBUTES = {
    "batch_size": "batch_size",
    "sequence_length": "sequence_length",
    "tp_degree": "tensor_parallel_size",
    "tensor_parallel_size": "tensor_parallel_size",
}


@on("Attribute", "NM512", "NM919")
def export_values(node: cst.Attribute, ctx: FileContext) -> cst.BaseExpression:
    """`model.neuron_config.batch_size` / `cfg.sequence_length` -> the value given at export."""
    shape = _SHAPE_ATTRIBUTES.get(node.attr.value)
    if shape is None or not ctx.enabled("NM512"):
        return node
    state = _state(ctx)
    owner = node.value
    export = None
    if type(owner) is cst.Attribute and owner.attr.value == "neuron_config":
        export = state.models.get(code(owner.value))
    elif type(owner) is cst.Name:
        export = state.configs.get(owner.value)
    value = export.shapes.get(shape) if export is not None else None
    if value is None:
        if type(owner) is cst.Attribute and owner.attr.value == "neuron_config" and export is not None:
            todo(ctx, "NM919", "native models have no neuron_config: use the value the model was exported with")
        return node
    ctx.hit("NM512")
    return value


@on("Subscript", "NM512")
def old_export_values(node: cst.Subscript, ctx: FileContext) -> cst.BaseExpression:
    """<=0.3 `model.config.neuron["batch_size"]` -> the value given at export."""
    owner = node.value
    if (
        not (
            type(owner) is cst.Attribute
            and owner.attr.value == "neuron"
            and type(owner.value) is cst.Attribute
            and owner.value.attr.value == "config"
        )
        or len(node.slice) != 1
        or not ctx.enabled("NM512")
    ):
        return node
    index = node.slice[0].slice
    key = string_value(index.value) if type(index) is cst.Index else None
    export = _state(ctx).models.get(code(owner.value.value))
    value = export.shapes.get(_SHAPE_ATTRIBUTES.get(key or "", "")) if export is not None else None
    if value is None:
        return node
    ctx.hit("NM512")
    return value


@removable
def neuron_config_statement(stmt: cst.BaseStatement, ctx: FileContext) -> Removal | None:
    """`cfg = X.get_neuron_config(...)` goes once its values were copied where they are read."""
    bound = assignment(stmt)
    if bound is None:
        return None
    target, value = bound
    if type(value) is cst.Call and method_of(value, "get_neuron_config"):
        assert type(value.func) is cst.Attribute
        if _model_class(value.func.value, ctx) is not None:
            return Removal("NM513", binds=target)
    return None
