"""NM709/NM921 and NM927: reads of removed fields on names known to hold training arguments read the
new field (or `True`, for `overwrite_output_dir`), or get a TODO where no field holds the same value; TRL's
`ModelConfig` reads follow its renames and moves; a script's own `torch_dtype` dataclass field gets a TODO.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import on
from migrate.rules.drift.bindings import _bindings, _trainer_config
from migrate.rules.drift.fields import FIELDS
from migrate.rules.todo_catalogue import todo

RULES: tuple[Rule, ...] = (
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


# TRL 1.x `ModelConfig` fields renamed with transformers 5 (`model_args.torch_dtype` is an AttributeError).
MODEL_CONFIG_FIELDS = {"torch_dtype": "dtype"}
# ... and fields TRL moved to the trainer configs (SFTConfig, DPOConfig, GRPOConfig, ...: huggingface/trl#5802,
# checked against trl 1.16.0, whose own scripts read `training_args.trust_remote_code`). The command line and
# recipes keep working unchanged: TrlParser hands `--trust_remote_code` to whichever dataclass has the field.
MODEL_CONFIG_MOVED = {"trust_remote_code"}


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
