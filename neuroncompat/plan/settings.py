"""What one plan is asked for: the step (train or generate) and the settings that decide its memory.

Kept apart from the tracing so the command line, the report and the accuracy test name the same fields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

TASKS = ("train", "generate")
DTYPES = ("fp32", "bf16")
# torch's Adafactor is not here: its step reads a parameter norm as a Python number (``.item()``), which a fake
# tensor does not have (docs/plan.md, "What the plan does not model")
OPTIMIZERS = ("adamw", "sgd")


class PlanInputError(Exception):
    """MODEL or a setting cannot be planned (no config, a config transformers cannot read, a bad size): the
    user's to fix, so ``plan`` exits 2 with this message, which names the file and the cause."""


@dataclass(frozen=True)
class PlanSettings:
    """One step to plan. ``autocast`` is None or "bf16"; ``max_new_tokens`` only matters for generate (the static
    cache holds ``seq_len + max_new_tokens`` positions); ``lora_r`` (None: full fine-tuning) trains LoRA adapters of
    that rank on ``lora_targets`` (empty: peft's default modules for the model type) over a frozen base."""

    task: str = "train"
    batch_size: int = 1
    seq_len: int = 2048
    dtype: str = "fp32"
    autocast: str | None = None
    optimizer: str = "adamw"
    gradient_checkpointing: bool = False
    max_new_tokens: int = 128
    lora_r: int | None = None
    lora_targets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("task", self.task, TASKS),
            ("dtype", self.dtype, DTYPES),
            ("optimizer", self.optimizer, OPTIMIZERS),
        ):
            if value not in allowed:
                raise PlanInputError(f"{name} {value!r}: expected one of {', '.join(allowed)}")
        if self.autocast not in (None, "bf16"):
            raise PlanInputError(f"autocast {self.autocast!r}: expected bf16 or none")
        for name, size in (("batch size", self.batch_size), ("sequence length", self.seq_len)):
            if size < 1:
                raise PlanInputError(f"{name} {size}: must be at least 1")
        if self.lora_r is not None and (self.lora_r < 1 or self.task != "train"):
            raise PlanInputError(f"LoRA rank {self.lora_r}: LoRA plans a training step, with a rank of at least 1")
        if self.lora_targets and self.lora_r is None:
            raise PlanInputError("--lora-target names the modules of LoRA adapters: give --lora-r too")
        if self.task == "generate" and self.max_new_tokens < 1:
            raise PlanInputError(f"max new tokens {self.max_new_tokens}: must be at least 1")

    def as_dict(self) -> dict[str, Any]:
        """The settings as the JSON report lists them."""
        fields = asdict(self)
        fields["lora_targets"] = list(self.lora_targets)
        return fields
