"""The one table of training-arguments fields that transformers 5 / TRL 1.x removed or renamed, and
what replaces each: the constructor keywords and reads here, the launch-line flags (NM817) and the recipe keys
(NM808) all read it, so a field is described once.
"""

from __future__ import annotations

from dataclasses import dataclass


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
