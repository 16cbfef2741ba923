"""What the ``neuroncompat plan`` tests share: the command run in-process, a Llama config written to a folder (no
weights: the plan reads none), the small shape most of them plan, and the report's committed JSON schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from helpers import REPO

from neuroncompat.cli import main

SCHEMA = json.loads((REPO / "docs" / "plan.schema.json").read_text())
# Four layers of width 256: large enough for every category and phase to show, small enough to plan in seconds.
SMALL = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
}


def run_plan(*args: str) -> Result:
    """``neuroncompat plan ARGS`` as the command line runs it."""
    return CliRunner().invoke(main, ["plan", *args], prog_name="neuroncompat")


def llama_config(folder: Path, **shape: Any) -> Path:
    """A Llama ``config.json`` of ``shape`` written to ``folder``."""
    from transformers import LlamaConfig

    LlamaConfig(**shape).save_pretrained(folder)
    return folder
