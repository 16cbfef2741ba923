"""NM701-NM708, NM711 and NM929: the constructor keywords of `*TrainingArguments`, TRL configs and
trainers that transformers 5 / TRL 1.x renamed or removed (a TypeError there) become their new names or go, and
the TRL 0.x trainer keywords TRL 1.x takes only from the config get a TODO naming the config field; `report_to=None`,
which transformers 5 rejects, becomes its default `"none"`.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import callee_name, kwarg, on, remove_arg, rename_kwarg, replace_arg
from migrate.rules.drift.fields import FIELDS, Removed
from migrate.rules.settings import setting, through
from migrate.rules.todo_catalogue import todo

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
        id="NM711",
        name="report-to-none",
        summary='`report_to=None` (or a `None` arm or fallback: `"wandb" if flag else None`, `x or None`) -> `"none"`.',
        rationale="transformers 4 read `report_to=None` as every installed integration; transformers 5 wraps it in a "
        "list and the Trainer fails: `ValueError: None is not supported, only azure_ml, comet_ml, ... are "
        'supported`. `"none"` is transformers 5\'s default, and what scripts that write `None` mean: no reporting '
        "(tloen/alpaca-lora's finetune.py). A literal `None` is rewritten where it is the keyword's value, an arm of a "
        "conditional or a side of `or`, in `*TrainingArguments` and TRL `*Config` calls.",
        before='args = TrainingArguments(output_dir="out", report_to="wandb" if use_wandb else None)\n',
        after='args = TrainingArguments(output_dir="out", report_to="wandb" if use_wandb else "none")\n',
        safety="unsafe",
        safety_reason="transformers 4 reported to every installed integration (wandb, tensorboard, ...) for `None`; "
        '`"none"` reports to none',
    ),
)


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


def _none_report_to(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    """NM711's leaf, applied through conditionals and `or` by the settings family: `None` -> `"none"` in the
    `report_to=` of training arguments and TRL configs (a `dict(report_to=None)` is left alone)."""
    if type(node) is cst.Name and node.value == "None" and _is_args(ctx.callee or ""):
        return cst.SimpleString('"none"').with_changes(lpar=node.lpar, rpar=node.rpar)
    return None


setting("NM711", r"report_to", through(_none_report_to), assign=False)


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
