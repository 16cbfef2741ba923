"""NM7xx version drift: arguments removed or renamed in transformers 5 and TRL 1.x.

Rationale per rule: docs/rules.md (NM7xx). Each was checked against the installed transformers 5.23.0 / trl 1.16.0
(`dataclasses.fields(TrainingArguments)`, the trainers' signatures): the old names are a
TypeError there, so an old script fails before any Neuron issue. Only calls of
`*TrainingArguments`, `*Config` (TRL configs) and `*Trainer` are touched; diffusers'
`ProjectConfiguration(logging_dir=...)` and argparse options keep their names.

A script that reads such a field (`if not training_args.overwrite_output_dir:`) fails with
AttributeError instead; NM709/NM921 handle the reads on names known to hold training arguments.
`FIELDS` is the one table of these fields: the launch-line rule NM817 and the recipe-key rule NM808
read it too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.names import dotted
from migrate.registry import Rule
from migrate.rules.base import callee_name, family_state, kwarg, on, remove_arg, rename_kwarg, replace_arg
from migrate.rules.retired import withdraw
from migrate.rules.todo_catalogue import REMOVED_TRL_API, todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM701",
        name="eval-strategy",
        summary="`evaluation_strategy=` -> `eval_strategy=`.",
        rationale="Renamed in transformers 4.46 and removed in 5.",
        before='args = TrainingArguments(output_dir="out", evaluation_strategy="steps")\n',
        after='args = TrainingArguments(output_dir="out", eval_strategy="steps")\n',
        safety="safe",
    ),
    Rule(
        id="NM702",
        name="overwrite-output-dir",
        summary="Drop `overwrite_output_dir=`.",
        rationale="Removed in transformers 5; the Trainer no longer refuses a non-empty output_dir.",
        before='args = TrainingArguments(output_dir="out", overwrite_output_dir=True)\n',
        after='args = TrainingArguments(output_dir="out")\n',
        safety="safe",
    ),
    Rule(
        id="NM703",
        name="logging-dir",
        summary="Drop `logging_dir=` from TrainingArguments/TRL configs.",
        rationale="Removed in transformers 5 (reporting integrations pick their own directory). Only inside "
        "TrainingArguments and `*Config` calls; `ProjectConfiguration(logging_dir=...)` and "
        "argparse `--logging_dir` are valid and stay.",
        before='args = TrainingArguments(output_dir="out", logging_dir="logs")\n',
        after='args = TrainingArguments(output_dir="out")\n',
        safety="unsafe",
        safety_reason="logs go to the integrations' default directory instead of `logging_dir`",
    ),
    Rule(
        id="NM704",
        name="warmup-ratio",
        summary="`warmup_ratio=r` -> `warmup_steps=r`.",
        rationale="transformers 5 removed `warmup_ratio`; `warmup_steps` accepts a float in [0, 1) as a "
        "ratio of the total steps (`TrainingArguments.get_warmup_steps`).",
        before='args = TrainingArguments(output_dir="out", warmup_ratio=0.03)\n',
        after='args = TrainingArguments(output_dir="out", warmup_steps=0.03)\n',
        safety="safe",
    ),
    Rule(
        id="NM705",
        name="max-seq-length",
        summary="`SFTConfig(max_seq_length=n)` -> `max_length=n`.",
        rationale="Renamed in TRL 0.20 and removed in 1.x.",
        before='args = SFTConfig(output_dir="out", max_seq_length=1024)\n',
        after='args = SFTConfig(output_dir="out", max_length=1024)\n',
        safety="safe",
    ),
    Rule(
        id="NM706",
        name="processing-class",
        summary="`Trainer(tokenizer=tok)` -> `Trainer(processing_class=tok)`.",
        rationale="Trainer, SFTTrainer, DPOTrainer, GRPOTrainer and friends take `processing_class` in "
        "transformers 5 / TRL 1.x; `tokenizer=` is a TypeError.",
        before="trainer = SFTTrainer(model=model, args=args, tokenizer=tokenizer)\n",
        after="trainer = SFTTrainer(model=model, args=args, processing_class=tokenizer)\n",
        safety="safe",
    ),
    Rule(
        id="NM707",
        name="group-by-length",
        summary='`group_by_length=True` -> `train_sampling_strategy="group_by_length"`; `no_cuda` -> `use_cpu`.',
        rationale="Both replaced in transformers 5; `use_mps_device` is removed (MPS is picked automatically). "
        'A `group_by_length` expression keeps its value: `"group_by_length" if flag else "random"` '
        "(`random`, the default, is what `False` meant); `False` is dropped.",
        before='args = TrainingArguments(output_dir="out", group_by_length=True)\n',
        after='args = TrainingArguments(output_dir="out", train_sampling_strategy="group_by_length")\n',
        safety="safe",
    ),
    Rule(
        id="NM708",
        name="max-prompt-length",
        summary="Drop `max_prompt_length=` from DPO/GRPO/... configs.",
        rationale="Removed from TRL 1.16 configs (prompts are no longer truncated separately); set "
        "`max_length` to bound the full sequence.",
        before='args = GRPOConfig(output_dir="out", max_prompt_length=256)\n',
        after='args = GRPOConfig(output_dir="out")\n',
        safety="unsafe",
        safety_reason="prompts are no longer truncated separately from the full sequence",
    ),
    Rule(
        id="NM709",
        name="removed-field-reads",
        safety="unsafe",
        safety_reason="`overwrite_output_dir` reads `True`, so checkpoint detection on it no longer resumes",
        summary="Reads of removed fields on a known training-arguments object: renamed fields read the new one, "
        "`overwrite_output_dir` reads `True`.",
        rationale="A script that parses `TrainingArguments` and then reads `training_args.overwrite_output_dir` "
        "(run_clm-style checkpoint detection) or `.evaluation_strategy` fails with AttributeError once the "
        "field is gone. Renamed fields with the same meaning read their new name; `group_by_length` becomes "
        "a test of `train_sampling_strategy`. `overwrite_output_dir` was only ever read by such scripts "
        "(transformers PR #41323): transformers 5 always behaves as if it were set (the Trainer never "
        "refuses a non-empty `output_dir` and resumes only from `resume_from_checkpoint`), which is also "
        "what Optimum launch lines asked for (`--overwrite_output_dir`, removed there by NM817), so it "
        "reads `True`; the report says so. Only names bound to a `TrainingArguments`/TRL config call or "
        "unpacked from `HfArgumentParser(...).parse_*()`/`TrlParser` are touched, and not when the "
        "script assigns the field itself. TRL 1.x moved `ModelConfig.trust_remote_code` to the trainer configs "
        "(huggingface/trl#5802): `model_args.trust_remote_code` reads the one trainer config in reach "
        "(`training_args.trust_remote_code`), else gets TODO NM921.",
        before="from transformers import HfArgumentParser, TrainingArguments\n"
        "parser = HfArgumentParser(TrainingArguments)\n(training_args,) = parser.parse_args_into_dataclasses()\n"
        "resume = not training_args.overwrite_output_dir\n",
        after="from transformers import HfArgumentParser, TrainingArguments\n"
        "parser = HfArgumentParser(TrainingArguments)\n(training_args,) = parser.parse_args_into_dataclasses()\n"
        "resume = not True\n",
    ),
    Rule(
        id="NM921",
        name="removed-field-read",
        safety="safe",
        summary="TODO: a read of a removed training-arguments field with no same-valued replacement.",
        rationale="`logging_dir`, `warmup_ratio`, `use_mps_device` (transformers 5) and `max_prompt_length` "
        "(TRL 1.x) have no field holding the same value, so the read raises AttributeError and needs a "
        "person; the TODO says what replaced the setting. Emitted by the drift family (NM709's resolution "
        "of the receiver).",
        before='from transformers import TrainingArguments\nargs = TrainingArguments(output_dir="out")\n'
        "writer = SummaryWriter(args.logging_dir)\n",
        after='from transformers import TrainingArguments\nargs = TrainingArguments(output_dir="out")\n'
        "# TODO(neuron-migrate NM921): args.logging_dir raises AttributeError: transformers 5 removed logging_dir; "
        "TensorBoard logs go to $TENSORBOARD_LOGGING_DIR, else <output_dir>/runs/<date>_<host>\n"
        "writer = SummaryWriter(args.logging_dir)\n",
        todo=True,
    ),
)


@dataclass(frozen=True)
class Removed:
    """A training-arguments field that transformers 5 / TRL 1.x no longer has, and what replaces it.

    One table for every place the field shows up: constructor keywords and reads (this module),
    launch-line flags (`migrate.configs.shell_rules`, NM817) and recipe keys
    (`migrate.configs.yaml_rules`, NM808).
    """

    rule: str
    why: str = ""  # what became of it, where a note or TODO has to say so (the field is gone or undecidable)
    new: str | None = None  # the field that replaces it; None when it is gone
    on_value: str | None = None  # a bool replaced by a valued field: the new field's value for True
    off_value: str | None = None  # ... and its value for False (the new field's default)
    read: str | None = None  # what `<args>.<field>` becomes ("{}" is the receiver); None: TODO NM921
    bool_field: bool = False  # a bool: HfArgumentParser let `--field` stand alone or take true/false
    owners: str = "any"  # "any" training arguments; "sft": SFTConfig; "trl": TRL configs but SFTConfig

    def owned_by(self, cls: str) -> bool:
        """Whether instances of the training-arguments class `cls` had this field."""
        if self.owners == "sft":
            return cls.endswith("SFTConfig")
        if self.owners == "trl":
            return cls.endswith("Config") and not cls.endswith("SFTConfig")
        return True


FIELDS: dict[str, Removed] = {
    "evaluation_strategy": Removed("NM701", new="eval_strategy", read="{}.eval_strategy"),
    "overwrite_output_dir": Removed(
        "NM702",
        "transformers 5 removed overwrite_output_dir and behaves as if it were set: the Trainer never "
        "refuses a non-empty output_dir and resumes only from resume_from_checkpoint",
        read="True",
        bool_field=True,
    ),
    "logging_dir": Removed(
        "NM703",
        "transformers 5 removed logging_dir; TensorBoard logs go to "
        "$TENSORBOARD_LOGGING_DIR, else <output_dir>/runs/<date>_<host>",
    ),
    "warmup_ratio": Removed(
        "NM704",
        "transformers 5 removed warmup_ratio; warmup_steps holds a ratio when it is below 1",
        new="warmup_steps",
    ),
    "max_seq_length": Removed("NM705", new="max_length", read="{}.max_length", owners="sft"),
    "group_by_length": Removed(
        "NM707",
        'replaced by train_sampling_strategy="group_by_length" in transformers 5',
        new="train_sampling_strategy",
        on_value="group_by_length",
        off_value="random",
        read='({}.train_sampling_strategy == "group_by_length")',
        bool_field=True,
    ),
    "no_cuda": Removed("NM707", new="use_cpu", read="{}.use_cpu", bool_field=True),
    "use_mps_device": Removed(
        "NM707", "transformers 5 removed use_mps_device; MPS is picked automatically (never on Neuron)", bool_field=True
    ),
    "max_prompt_length": Removed(
        "NM708",
        "TRL 1.x removed max_prompt_length; prompts are no longer truncated "
        "separately, max_length bounds the whole sequence",
        owners="trl",
    ),
}


@on("ImportFrom", "NM924")
def removed_trl_import(node: cst.ImportFrom, ctx: FileContext) -> cst.ImportFrom:
    """`from trl import setup_chat_format` fails at import under TRL 1.x, read or not: the import goes.

    A script that imports it for a branch it may never take (alignment-handbook's `sft.py` calls it only
    when the tokenizer has no chat template; philschmid's `run_fsdp_qlora.py` never calls it) then runs;
    each call keeps TODO NM924 saying what replaces it (`removed_trl_call`).
    """
    if not (type(node.module) is cst.Name and node.module.value == "trl") or isinstance(node.names, cst.ImportStar):
        return node
    for alias in node.names:
        if type(alias.name) is cst.Name and alias.name.value in REMOVED_TRL_API and ctx.enabled("NM924"):
            ctx.hit("NM924")
            withdraw(ctx, f"trl.{alias.name.value}")
    return node


@on("Call", "NM924")
def removed_trl_call(node: cst.Call, ctx: FileContext) -> cst.Call:
    """A call of a TRL helper removed in 1.x (its import is withdrawn): TODO NM924 on its statement."""
    qualified = ctx.qualify(node.func) or ""
    head, _, name = qualified.rpartition(".")
    message = REMOVED_TRL_API.get(name) if head == "trl" else None
    if message is not None and ctx.enabled("NM924"):
        ctx.todo("NM924", message)
    return node


# TRL 1.x `ModelConfig` fields renamed with transformers 5 (`model_args.torch_dtype` is an AttributeError).
MODEL_CONFIG_FIELDS = {"torch_dtype": "dtype"}
# ... and fields TRL moved to the trainer configs (SFTConfig, DPOConfig, GRPOConfig, ...: huggingface/trl#5802,
# checked against trl 1.16.0, whose own scripts read `training_args.trust_remote_code`). The command line and
# recipes keep working unchanged: TrlParser hands `--trust_remote_code` to whichever dataclass has the field.
MODEL_CONFIG_MOVED = {"trust_remote_code"}
_NOT_TRAINER_CONFIGS = ("ModelConfig", "LoraConfig", "BitsAndBytesConfig", "GenerationConfig", "AutoConfig")


def _is_args(name: str) -> bool:
    return name.endswith("TrainingArguments") or (
        name.endswith("Config")
        and name not in ("LoraConfig", "BitsAndBytesConfig", "GenerationConfig", "AutoConfig", "ProjectConfiguration")
    )


# TRL 0.x trainer keywords that TRL 1.x reads only from the trainer's config: {keyword: its name on the config, or
# None where TRL 1.x has no such setting}. SFTTrainer's from TRL 0.8-0.11, DPOTrainer's from TRL 0.7-0.11; the
# config names checked against trl 1.16.0's SFTConfig/DPOConfig fields.
TRAINER_KWARGS_MOVED: dict[str, dict[str, str | None]] = {
    "SFTTrainer": {
        **{k: k for k in ("dataset_text_field", "packing", "dataset_kwargs", "dataset_num_proc", "eval_packing")},
        **{k: k for k in ("neftune_noise_alpha", "model_init_kwargs")},
        **dict.fromkeys(("dataset_batch_size", "num_of_sequences", "chars_per_token")),
        "max_seq_length": "max_length",
    },
    "DPOTrainer": {
        **{k: k for k in ("beta", "loss_type", "label_smoothing", "max_length", "truncation_mode")},
        **{k: k for k in ("precompute_ref_log_probs", "model_init_kwargs")},
        **dict.fromkeys(("max_prompt_length", "max_target_length", "padding_value", "label_pad_token_id")),
        **dict.fromkeys(("generate_during_eval", "ref_model_init_kwargs")),
    },
}


def _moved_trainer_kwargs(node: cst.Call, name: str, ctx: FileContext) -> None:
    """TODO NM929 on `SFTTrainer(packing=True, ...)`: TRL 1.x takes those settings only from its config."""
    moved = TRAINER_KWARGS_MOVED.get(name)
    if moved is None or not (ctx.qualify(node.func) or "").startswith("trl."):
        return
    found = [a.keyword.value for a in node.args if a.keyword is not None and a.keyword.value in moved]
    if not found:
        return
    kept = [k if moved[k] == k else f"{k} (there: {moved[k]})" for k in found if moved[k] is not None]
    gone = [k for k in found if moved[k] is None]
    config = name.removesuffix("Trainer") + "Config"
    parts = [f"set {', '.join(kept)} on the {config} passed as args"] if kept else []
    parts += [f"{', '.join(gone)}: no TRL 1.x setting, drop"] if gone else []
    todo(ctx, "NM929", f"TRL 1.x {name} no longer takes these keywords: " + "; ".join(parts))


@on("Call", "NM701", "NM702", "NM703", "NM704", "NM705", "NM706", "NM707", "NM708", "NM929")
def drift_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    name = callee_name(node) or ""
    if name.endswith("Trainer"):
        _moved_trainer_kwargs(node, name, ctx)
        tokenizer = kwarg(node, "tokenizer")
        if tokenizer is not None and kwarg(node, "processing_class") is None and ctx.enabled("NM706"):
            ctx.hit("NM706")
            return rename_kwarg(node, tokenizer, "processing_class")
        return node
    if not _is_args(name):
        return node
    for arg in list(node.args):
        keyword = arg.keyword.value if arg.keyword is not None else None
        removed = FIELDS.get(keyword or "")
        # NM708 is about DPO/GRPO/... configs; an SFTConfig call never took `max_prompt_length`.
        if removed is None or not ctx.enabled(removed.rule) or (removed.owners == "trl" and name.endswith("SFTConfig")):
            continue
        arg = kwarg(node, keyword or "") or arg
        if removed.new is None or (removed.on_value is not None and _is_false(arg.value)):
            node = remove_arg(node, arg)
        elif kwarg(node, removed.new) is not None:
            continue
        elif removed.on_value is None:
            node = rename_kwarg(node, arg, removed.new)
        else:
            node = replace_arg(node, arg, arg.with_changes(keyword=cst.Name(removed.new), value=_valued(arg, removed)))
        ctx.hit(removed.rule)
    return node


def _valued(arg: cst.Arg, removed: Removed) -> cst.BaseExpression:
    """The new field's value for a bool that was `True`, or an expression: `group_by_length=flag` ->
    `"group_by_length" if flag else "random"` (the value carried: an expression may well be False)."""
    on = cst.SimpleString(f'"{removed.on_value}"')
    if type(arg.value) is cst.Name and arg.value.value == "True" or removed.off_value is None:
        return on
    test = arg.value
    if isinstance(test, cst.IfExp | cst.Lambda | cst.NamedExpr):
        test = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.IfExp(test=test, body=on, orelse=cst.SimpleString(f'"{removed.off_value}"'))


def _is_false(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Name and node.value == "False"


# ---- reads of removed fields (NM709, NM921) ------------------------------------------------

_PARSE_METHODS = frozenset(
    {"parse_args_into_dataclasses", "parse_json_file", "parse_yaml_file", "parse_dict", "parse_args_and_config"}
)


@dataclass
class _Bindings:
    """Names known to hold training arguments, in source order; any other rebinding forgets a name."""

    parsers: dict[str, list[str | None]] = field(default_factory=dict)  # parser -> its dataclasses' classes
    arguments: dict[str, str] = field(default_factory=dict)  # name -> its training-arguments class
    # parameters annotated with a class named like a trainer config this file cannot resolve (alignment-handbook's
    # `training_args: SFTConfig`, its own subclass of trl's): read only to find where a moved ModelConfig field went
    config_params: set[str] = field(default_factory=set)


def _bindings(ctx: FileContext) -> _Bindings:
    return family_state(ctx, "drift", _Bindings)


def _arguments_class(node: cst.BaseExpression, ctx: FileContext) -> str | None:
    """The class name when `node` names transformers' TrainingArguments, a TRL config or Optimum's copies."""
    qualified = ctx.qualify(node) or ""
    root, name = qualified.split(".")[0], qualified.rpartition(".")[2]
    if root == "transformers" and name.endswith("TrainingArguments"):
        return name
    if root == "trl" and name.endswith("Config") and name != "DatasetMixtureConfig":
        return name
    if root == "optimum" and name.endswith(("TrainingArguments", "SFTConfig", "ORPOConfig")):
        return name
    return None


def _parser_classes(call: cst.Call, ctx: FileContext) -> list[str | None] | None:
    """For `HfArgumentParser((A, B, TrainingArguments))` (or TrlParser, Optimum's): each dataclass's class."""
    qualified = ctx.qualify(call.func) or ""
    if qualified.split(".")[0] not in ("transformers", "trl", "optimum") or not qualified.endswith(
        ("HfArgumentParser", "TrlParser")
    ):
        return None
    first = call.args[0].value if call.args and call.args[0].keyword is None and not call.args[0].star else None
    if type(first) in (cst.Tuple, cst.List):
        return [None if type(e) is cst.StarredElement else _arguments_class(e.value, ctx) for e in first.elements]  # type: ignore[union-attr]
    return [_arguments_class(first, ctx)] if first is not None else None


def _parsed_classes(value: cst.BaseExpression, ctx: FileContext) -> list[str | None] | None:
    """The dataclasses, in order, that `<parser>.parse_*(...)` returns."""
    if (
        type(value) is not cst.Call
        or type(value.func) is not cst.Attribute
        or value.func.attr.value not in _PARSE_METHODS
    ):
        return None
    parser = value.func.value
    if type(parser) is cst.Name:
        return _bindings(ctx).parsers.get(parser.value)
    return _parser_classes(parser, ctx) if type(parser) is cst.Call else None


def _bound_names(target: cst.BaseExpression) -> list[str]:
    """The plain names an assignment target (`a`, `a, (b, *c)`) binds; attributes and subscripts bind none."""
    if type(target) is cst.Name:
        return [target.value]
    if type(target) in (cst.Tuple, cst.List):
        return [name for e in target.elements for name in _bound_names(e.value)]  # type: ignore[attr-defined]
    if type(target) is cst.StarredElement:
        return _bound_names(target.value)
    return []


@on("Assign")
def arguments_binding(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Track `args = TrainingArguments(...)`, `parser = HfArgumentParser(...)` and the unpacking of its parse."""
    for target in node.targets:
        _forget(ctx, target.target)
    if len(node.targets) == 1:
        _bind(ctx, node.targets[0].target, node.value)
    return node


@on("AnnAssign")
def annotated_binding(node: cst.AnnAssign, ctx: FileContext) -> cst.AnnAssign:
    """`args: TrainingArguments = TrainingArguments(...)`, and any other annotated rebinding."""
    _forget(ctx, node.target)
    if node.value is not None:
        _bind(ctx, node.target, node.value)
    return node


@on("Param")
def arguments_shadowed(node: cst.Param, ctx: FileContext) -> cst.Param:
    """A parameter of the same name shadows a tracked binding: forget it rather than guess; one annotated with
    a training-arguments class holds one (`def get_model(model_args: ModelConfig, ...)`, open-r1's model utils).

    A parameter is left before the function's body is visited, so its reads there see the binding.
    """
    _forget(ctx, node.name)
    if node.annotation is not None:
        cls = _arguments_class(node.annotation.annotation, ctx)
        if cls is not None:
            _bindings(ctx).arguments[node.name.value] = cls
        elif (dotted(node.annotation.annotation) or "").rpartition(".")[2].endswith("Config"):
            if (dotted(node.annotation.annotation) or "").rpartition(".")[2] not in _NOT_TRAINER_CONFIGS:
                _bindings(ctx).config_params.add(node.name.value)
    return node


@on("FunctionDef")
def parameters_out_of_scope(node: cst.FunctionDef, ctx: FileContext) -> cst.FunctionDef:
    """A function's parameters mean nothing after it: `get_model(model_args, training_args)` must not make a
    later function's `model_args.trust_remote_code` read a `training_args` it does not have."""
    params = node.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        _forget(ctx, param.name)
    return node


def _trainer_config(ctx: FileContext) -> str | None:
    """The one name bound to a TRL trainer config (`training_args` of `TrlParser((ModelConfig, SFTConfig))`)."""
    state = _bindings(ctx)
    names = {n for n, cls in state.arguments.items() if cls.endswith("Config") and cls not in _NOT_TRAINER_CONFIGS}
    names |= state.config_params
    return names.pop() if len(names) == 1 else None


# Names scripts give TRL's `ModelConfig` where no binding says so (`def get_model(model_args, training_args)`).
_MODEL_ARGS = re.compile(r"model_(?:args|arguments|config|cfg)")
_IMPORTS_TRL = re.compile(r"^[ \t]*(?:from[ \t]+trl\b|import[ \t]+trl\b)", re.M)
_DTYPE_FIELD = re.compile(r"^[ \t]+torch_dtype[ \t]*:", re.M)
# A script that reads its arguments from a YAML recipe, which NM818 migrates.
_READS_RECIPES = re.compile(r"parse_yaml_file|parse_args_and_config|TrlParser|\.ya?ml\b")


def _model_config_by_name(receiver: str, name: str, ctx: FileContext) -> bool:
    """`model_args.torch_dtype` in a TRL script that defines no `torch_dtype` field of its own: TRL's ModelConfig.

    Recipes and launch lines migrated by NM818 say `dtype`, which is all TRL 1.x's ModelConfig has; a reader
    left at `torch_dtype` is an AttributeError there. A script with its own `torch_dtype` field gets NM927.
    """
    return (
        name in MODEL_CONFIG_FIELDS
        and _MODEL_ARGS.fullmatch(receiver) is not None
        and _IMPORTS_TRL.search(ctx.text) is not None
        and _DTYPE_FIELD.search(ctx.text) is None
    )


@on("AnnAssign", "NM927")
def own_dtype_field(node: cst.AnnAssign, ctx: FileContext) -> cst.AnnAssign:
    """NM927: a script's own dataclass field `torch_dtype`, which YAML recipes migrated by NM818 no longer set.

    Only in a script that reads YAML recipes: one configured by its command line (`--torch_dtype`) or JSON
    keeps working as it is.
    """
    if (
        type(node.target) is cst.Name
        and node.target.value == "torch_dtype"
        and "@dataclass" in ctx.text
        and _READS_RECIPES.search(ctx.text)
    ):
        todo(ctx, "NM927")
    return node


def _forget(ctx: FileContext, target: cst.BaseExpression) -> None:
    state = _bindings(ctx)
    for name in _bound_names(target):
        state.arguments.pop(name, None)
        state.parsers.pop(name, None)
        state.config_params.discard(name)


def _bind(ctx: FileContext, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
    state = _bindings(ctx)
    if type(target) is cst.Name and type(value) is cst.Call:
        parser = _parser_classes(value, ctx)
        cls = _arguments_class(value.func, ctx)
        if parser is not None:
            state.parsers[target.value] = parser
        elif cls is not None:
            state.arguments[target.value] = cls
    index = _index(value)
    classes = _parsed_classes(value.value if index is not None else value, ctx)  # type: ignore[attr-defined]
    if classes is None:
        return
    if index is not None and type(target) is cst.Name and index < len(classes) and classes[index]:
        state.arguments[target.value] = classes[index]  # type: ignore[assignment]
    elif index is None and type(target) in (cst.Tuple, cst.List):
        for element, cls in zip(target.elements, classes):  # type: ignore[attr-defined]
            if type(element.value) is not cst.Name:
                break  # a starred target: the positions after it are unknown
            if cls is not None:
                state.arguments[element.value.value] = cls


def _index(value: cst.BaseExpression) -> int | None:
    """`i` for `<expr>[i]` with a literal non-negative integer index."""
    if type(value) is cst.Subscript and len(value.slice) == 1:
        element = value.slice[0].slice
        if type(element) is cst.Index and type(element.value) is cst.Integer:
            return int(element.value.value)
    return None


@on("Attribute", "NM701", "NM702", "NM703", "NM704", "NM705", "NM707", "NM708", "NM709", "NM921")
def removed_field_read(node: cst.Attribute, ctx: FileContext) -> cst.BaseExpression:
    """`training_args.overwrite_output_dir` -> `True`; `.evaluation_strategy` -> `.eval_strategy`; else TODO."""
    if type(node.value) is not cst.Name:
        return node
    receiver, name = node.value.value, node.attr.value
    cls = _bindings(ctx).arguments.get(receiver)
    if cls is None and _model_config_by_name(receiver, name, ctx):
        cls = "ModelConfig"
    if cls == "ModelConfig" and name in MODEL_CONFIG_MOVED:
        return _moved_model_config_read(node, receiver, name, ctx)
    if cls == "ModelConfig":  # TRL's model arguments are no training arguments: their own renames only
        new = MODEL_CONFIG_FIELDS.get(name)
        if new is None or not ctx.enabled("NM709") or _assigned(ctx.text, receiver, name):
            return node
        ctx.hit("NM709")
        return node.with_changes(attr=cst.Name(new))
    removed = FIELDS.get(name)
    if removed is None:
        return node
    if cls is None or not removed.owned_by(cls) or _assigned(ctx.text, receiver, name):
        return node
    if removed.read is None:
        if ctx.enabled("NM921"):
            ctx.todo("NM921", f"{receiver}.{name} raises AttributeError: {removed.why}")
        return node
    if not ctx.enabled("NM709"):
        return node
    ctx.hit("NM709")
    if removed.new is None:
        ctx.warn("NM709", f"{receiver}.{name} now reads {removed.read}: {removed.why}")
    return cst.parse_expression(removed.read.format(receiver))


def _moved_model_config_read(node: cst.Attribute, receiver: str, name: str, ctx: FileContext) -> cst.BaseExpression:
    """`model_args.trust_remote_code` -> `training_args.trust_remote_code`, where one trainer config is in reach."""
    if _assigned(ctx.text, receiver, name):
        return node
    config = _trainer_config(ctx)
    if config is None:
        if ctx.enabled("NM921"):
            ctx.todo(
                "NM921",
                f"{receiver}.{name} raises AttributeError: TRL 1.x moved {name} from ModelConfig to the trainer "
                f"configs (SFTConfig, DPOConfig, GRPOConfig, ...); read it from the training arguments",
            )
        return node
    if not ctx.enabled("NM709"):
        return node
    ctx.hit("NM709")
    return node.with_changes(value=cst.Name(config))


def _assigned(text: str, receiver: str, name: str) -> bool:
    """Whether the script sets `receiver.name` itself (a plain attribute then, readable as before)."""
    target = rf"\b{receiver}\s*\.\s*{name}\b"  # both are identifiers: nothing to escape
    return bool(
        re.search(
            rf"{target}\s*(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=)|\bdel\s+{target}|"
            rf"setattr\(\s*{receiver}\s*,\s*['\"]{name}['\"]",
            text,
        )
    )
