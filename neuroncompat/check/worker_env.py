"""The environment of the ``check`` worker: the simulated device, offline, quiet, with the user's settings kept."""

from __future__ import annotations

from collections.abc import Mapping


def worker_environment(parent: Mapping[str, str]) -> dict[str, str]:
    """``parent`` plus the simulator and offline hub; ``NEURONCOMPAT_DISABLE`` and the like pass through."""
    env = dict(parent)
    env["NEURONCOMPAT_SIMULATE"] = "1"
    env["HF_HUB_OFFLINE"] = "1"
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")
    return env
