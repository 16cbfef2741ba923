"""NM7xx version drift: arguments removed or renamed in transformers 5 and TRL 1.x.

Catalogue 3.12. Each was checked against the installed transformers 5.23.0 / trl 1.16.0
(`dataclasses.fields(TrainingArguments)`, the trainers' signatures): the old names are a
TypeError there, so an old script fails before any Neuron issue. Only calls of
`*TrainingArguments`, `*Config` (TRL configs) and `*Trainer` are touched; diffusers'
`ProjectConfiguration(logging_dir=...)` and argparse options keep their names.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule, register
from migrate.rules.base import callee_name, kwarg, on, remove_arg, rename_kwarg, replace_arg

_RULES = [
    ("NM701", "eval-strategy", "`evaluation_strategy=` -> `eval_strategy=`.",
     "Renamed in transformers 4.46 and removed in 5.",
     'args = TrainingArguments(output_dir="out", evaluation_strategy="steps")\n',
     'args = TrainingArguments(output_dir="out", eval_strategy="steps")\n'),
    ("NM702", "overwrite-output-dir", "Drop `overwrite_output_dir=`.",
     "Removed in transformers 5; the Trainer no longer refuses a non-empty output_dir.",
     'args = TrainingArguments(output_dir="out", overwrite_output_dir=True)\n',
     'args = TrainingArguments(output_dir="out")\n'),
    ("NM703", "logging-dir", "Drop `logging_dir=` from TrainingArguments/TRL configs.",
     "Removed in transformers 5 (reporting integrations pick their own directory). Only inside "
     "TrainingArguments and `*Config` calls; `ProjectConfiguration(logging_dir=...)` and "
     "argparse `--logging_dir` are valid and stay.",
     'args = TrainingArguments(output_dir="out", logging_dir="logs")\n',
     'args = TrainingArguments(output_dir="out")\n'),
    ("NM704", "warmup-ratio", "`warmup_ratio=r` -> `warmup_steps=r`.",
     "transformers 5 removed `warmup_ratio`; `warmup_steps` accepts a float in [0, 1) as a "
     "ratio of the total steps (`TrainingArguments.get_warmup_steps`).",
     'args = TrainingArguments(output_dir="out", warmup_ratio=0.03)\n',
     'args = TrainingArguments(output_dir="out", warmup_steps=0.03)\n'),
    ("NM705", "max-seq-length", "`SFTConfig(max_seq_length=n)` -> `max_length=n`.",
     "Renamed in TRL 0.20 and removed in 1.x.",
     'args = SFTConfig(output_dir="out", max_seq_length=1024)\n',
     'args = SFTConfig(output_dir="out", max_length=1024)\n'),
    ("NM706", "processing-class", "`Trainer(tokenizer=tok)` -> `Trainer(processing_class=tok)`.",
     "Trainer, SFTTrainer, DPOTrainer, GRPOTrainer and friends take `processing_class` in "
     "transformers 5 / TRL 1.x; `tokenizer=` is a TypeError.",
     'trainer = SFTTrainer(model=model, args=args, tokenizer=tokenizer)\n',
     'trainer = SFTTrainer(model=model, args=args, processing_class=tokenizer)\n'),
    ("NM707", "group-by-length", "`group_by_length=True` -> `train_sampling_strategy=\"group_by_length\"`; `no_cuda` -> `use_cpu`.",
     "Both replaced in transformers 5; `use_mps_device` is removed (MPS is picked automatically).",
     'args = TrainingArguments(output_dir="out", group_by_length=True)\n',
     'args = TrainingArguments(output_dir="out", train_sampling_strategy="group_by_length")\n'),
    ("NM708", "max-prompt-length", "Drop `max_prompt_length=` from DPO/GRPO/... configs.",
     "Removed from TRL 1.16 configs (prompts are no longer truncated separately); set "
     "`max_length` to bound the full sequence.",
     'args = GRPOConfig(output_dir="out", max_prompt_length=256)\n',
     'args = GRPOConfig(output_dir="out")\n'),
]
for rule_id, name, summary, rationale, before, after in _RULES:
    register(Rule(id=rule_id, name=name, summary=summary, rationale=rationale, before=before, after=after))

_DROP = {"overwrite_output_dir": "NM702", "logging_dir": "NM703", "use_mps_device": "NM707"}


def _is_args(name: str) -> bool:
    return name.endswith("TrainingArguments") or (name.endswith("Config") and name not in ("LoraConfig", "BitsAndBytesConfig", "GenerationConfig", "AutoConfig", "ProjectConfiguration"))


@on("Call")
def drift_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    name = callee_name(node) or ""
    if name.endswith("Trainer"):
        tokenizer = kwarg(node, "tokenizer")
        if tokenizer is not None and kwarg(node, "processing_class") is None and ctx.enabled("NM706"):
            ctx.hit("NM706")
            return rename_kwarg(node, tokenizer, "processing_class")
        return node
    if not _is_args(name):
        return node
    for arg in list(node.args):
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword is None:
            continue
        arg = kwarg(node, keyword) or arg
        if keyword == "evaluation_strategy" and ctx.enabled("NM701") and kwarg(node, "eval_strategy") is None:
            ctx.hit("NM701")
            node = rename_kwarg(node, arg, "eval_strategy")
        elif keyword in _DROP and ctx.enabled(_DROP[keyword]):
            ctx.hit(_DROP[keyword])
            node = remove_arg(node, arg)
        elif keyword == "warmup_ratio" and ctx.enabled("NM704") and kwarg(node, "warmup_steps") is None:
            ctx.hit("NM704")
            node = rename_kwarg(node, arg, "warmup_steps")
        elif keyword == "max_seq_length" and ctx.enabled("NM705") and kwarg(node, "max_length") is None:
            ctx.hit("NM705")
            node = rename_kwarg(node, arg, "max_length")
        elif keyword == "group_by_length" and ctx.enabled("NM707"):
            ctx.hit("NM707")
            if type(arg.value) is cst.Name and arg.value.value == "False":
                node = remove_arg(node, arg)
            else:
                node = replace_arg(node, arg, arg.with_changes(keyword=cst.Name("train_sampling_strategy"), value=cst.SimpleString('"group_by_length"')))
        elif keyword == "no_cuda" and ctx.enabled("NM707"):
            ctx.hit("NM707")
            node = rename_kwarg(node, arg, "use_cpu")
        elif keyword == "max_prompt_length" and ctx.enabled("NM708") and name != "SFTConfig":
            ctx.hit("NM708")
            node = remove_arg(node, arg)
    return node
