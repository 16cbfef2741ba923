"""Which ``NEURON_RT_VISIBLE_CORES`` values can work, and why a value cannot: one rule for the shim and the simulator.

Two sources, both in docs/gaps.md#visible_cores:

- **The Neuron runtime** (developer guide, ``NEURON_RT_VISIBLE_CORES=<m,n,p-q>``,
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/guides/nrt-developer-guide.html,
  read in the aws-neuron-sdk sources at neuron-runtime/guides/nrt-developer-guide.rst:1051-1054 and :1096;
  configuration guide,
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/guides/configuration-guide.html): the
  variable is a list of zero-based NeuronCore indices, a range, or both (``3,4,5,6``, ``3-6``, ``3-5,6``), and
  "the resulting range must be contiguous": ``3,5,6`` is not valid, and "indices need to be provided in
  consecutive increasing order". The process then sees the cores renumbered from 0 (``3,4`` are ``0`` and
  ``1``), reserved exclusively for it. The indices are logical NeuronCores (with the default LNC=2 a Trn2 chip
  shows 4). A single core (``0``) is the ordinary pin.
- **The TRL Trainium guide** (TRL 1.16, https://github.com/huggingface/trl/releases/tag/v1.16.0): ``0,1``,
  ``2,3`` and ``0-3`` work, ``1,2`` does not (its collectives). Read as a rule (an inference, said so in the
  message): a set of more than one core under the default LNC=2 covers whole pairs ``2k,2k+1``. Under
  ``NEURON_LOGICAL_NC_CONFIG=1`` the guide says nothing, and only the runtime's rule is checked.

The shim checks both (:func:`refusal`); the simulator refuses only what the runtime documents
(:func:`runtime_refusal`) and then shows the process :func:`visible` cores, renumbered from 0.

Plain Python, no torch: the shim checks the variable at ``import neuroncompat``, before torch is imported.
"""

from __future__ import annotations

import os

ENV = "NEURON_RT_VISIBLE_CORES"
LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"


def parse_cores(value: str) -> list[int]:
    """``"0,1"``, ``"0-3"``, ``"0-1,4-5"`` -> the core indices in the order written; ValueError when malformed."""
    cores: list[int] = []
    for part in value.replace(" ", "").split(","):
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"cannot parse {part!r}")
        start, end = int(first), int(last) if dash else int(first)
        if end < start:
            raise ValueError(f"range {part!r} runs backwards")
        cores.extend(range(start, end + 1))
    return cores


def format_cores(cores: list[int]) -> str:
    """``[0, 1, 2, 3]`` -> ``0-3``; ``[2, 3]`` -> ``2,3``."""
    if len(cores) > 2 and cores == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(map(str, cores))


def lnc() -> int:
    """The logical NeuronCore size the runtime uses: ``NEURON_LOGICAL_NC_CONFIG``, default 2."""
    raw = os.environ.get(LNC_ENV, "").strip()
    return int(raw) if raw.isdigit() else 2


def _runs(cores: list[int]) -> list[list[int]]:
    """The contiguous increasing runs of ``cores`` as written: ``0,1,4,5`` -> ``[[0, 1], [4, 5]]``."""
    runs: list[list[int]] = []
    for core in cores:
        if runs and core == runs[-1][-1] + 1:
            runs[-1].append(core)
        else:
            runs.append([core])
    return runs


def runtime_refusal(value: str) -> str | None:
    """Why the Neuron runtime refuses ``value`` (its own documented rule), or None when it accepts it."""
    try:
        cores = parse_cores(value)
    except ValueError as exc:
        return (
            f"{ENV}={value!r} is not a core list ({exc}): the Neuron runtime takes a core index, a list or a "
            "range of them (0, 0,1, 0-3)"
        )
    if len(_runs(cores)) == 1:
        return None
    rule = (
        f"{ENV}={value} is not contiguous: the Neuron runtime takes a list or range of NeuronCores that must be "
        "contiguous, in consecutive increasing order (its example of an invalid set is 3,5,6)"
    )
    named = sorted(set(cores))
    runs = _runs(named)
    if len(runs) == 1:
        return f"{rule}. Write it in increasing order, each core once: {format_cores(named)}"
    choices = " or ".join(format_cores(run) for run in runs[:3])
    return f"{rule}. Use one run per process ({choices}), or {_span(named)} for all of them"


def _span(cores: list[int]) -> str:
    """The contiguous range covering every core named: ``0-1,4-5`` -> ``0-5``."""
    return format_cores(list(range(min(cores), max(cores) + 1)))


def refusal(value: str) -> str | None:
    """Why ``value`` cannot work (the runtime's rule, then the TRL guide's), or None when it can."""
    refused = runtime_refusal(value)
    if refused is not None:
        return refused
    cores = parse_cores(value)
    if len(cores) == 1 or lnc() != 2:
        return None
    if cores[0] % 2 == 0 and len(cores) % 2 == 0:
        return None
    first = cores[0] - cores[0] % 2
    pairs = [format_cores([c, c + 1]) for c in range(first, cores[-1] + 1, 2)]
    return (
        f"{ENV}={value} does not work: the TRL Trainium guide lists 0,1, 2,3 and 0-3 as working and 1,2 as not "
        "(collectives). neuroncompat reads that as: under the default LNC=2, a set of "
        f"more than one logical NeuronCore covers whole pairs 2k,2k+1. Use {' or '.join(pairs)}, "
        f"{_span([first, cores[-1] | 1])} for all of them, a single core, or set {LNC_ENV}=1. "
        f"(accelerate launch --gpu_ids copies its value into {ENV} verbatim.)"
    )
