"""MODEL to a transformers config, with no weights read: a directory, a ``config.json``, or a cached hub id.

Finding the file is :func:`neuroncompat.check.config_file`'s job (``check`` takes the same MODEL); this module
turns its errors, and transformers' own, into a :class:`PlanInputError` that names the file and the cause.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuroncompat.check import CheckInputError, config_file
from neuroncompat.plan.settings import PlanInputError


def read(model: str) -> tuple[Path, Any]:
    """MODEL's ``config.json`` and the ``PretrainedConfig`` transformers reads from it, whatever its model class
    (a script's ``from_pretrained`` may load any; neuroncompat/plan/script_model.py)."""
    try:
        path = config_file(model)
    except CheckInputError as exc:
        raise PlanInputError(str(exc)) from exc
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(path))
    except (ValueError, KeyError, OSError, TypeError) as exc:  # an unknown model_type, a missing field
        raise PlanInputError(f"{path}: transformers cannot read this config: {exc}") from exc
    return path, config


def load(model: str) -> tuple[Path, Any]:
    """MODEL's ``config.json`` and its config, for a model the plan builds as ``AutoModelForCausalLM``."""
    path, config = read(model)
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING

    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING:
        raise PlanInputError(
            f"{path}: model_type {config.model_type!r} has no causal-LM class in transformers; the plan traces "
            "AutoModelForCausalLM's training step or generation"
        )
    return path, config
