"""NeuronCore sets as written in `NEURON_RT_VISIBLE_CORES` and accelerate's `gpu_ids`.

The same two rules as the shim's `neuroncompat/core_sets.py` (docs/gaps.md#visible_cores), so a migrated
launcher passes the shim's `visible_cores` check and the shim's warning names the set NM803 writes:

- the Neuron runtime: the variable lists logical NeuronCores (the ones `torch.neuron` counts), and the
  set must be one contiguous run in increasing order (`0`, `0,1`, `3-5,6`; not `0-1,4-5`, `3,5,6`, `1,0`);
- the TRL Trainium guide: `0,1`, `2,3`, `0-3` work and `1,2` does not; read (as the shim reads it) as
  "under the default LNC=2, a set of more than one core covers whole pairs 2k,2k+1".

GPU `i` of a CUDA script becomes logical core `i` under any LNC, as the shim translates
`CUDA_VISIBLE_DEVICES`: `cuda:i` and `neuron:i` are then the same device. A copy rather than an import
because importing anything under `neuroncompat` runs its `__init__`, which applies the shim (and would
stop the codemod on a bad core set in its own environment); `tests/migrate/test_configs.py` checks that
both give the same verdict on every set of its table.
"""

from __future__ import annotations

import re

_CORE_LIST = re.compile(r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*")


def parse(value: str) -> list[int] | None:
    """`"0,1"`, `"0-3"`, `"3-5,6"` -> the indices in the order written; None when not a core list."""
    value = value.replace(" ", "")
    if not _CORE_LIST.fullmatch(value):
        return None
    cores: list[int] = []
    for part in value.split(","):
        low, _, high = part.partition("-")
        if int(high or low) < int(low):
            return None
        cores.extend(range(int(low), int(high or low) + 1))
    return cores


def render(cores: list[int]) -> str:
    """`0-3` for a run of more than two, else `0,1` / `4,5,8,9`."""
    if len(cores) > 2 and cores == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(map(str, cores))


def from_gpus(gpus: list[int]) -> str:
    """The logical NeuronCores standing in for these GPU ids: GPU i -> core i, each once, increasing."""
    return render(sorted(set(gpus)))


def _runs(cores: list[int]) -> list[list[int]]:
    """The contiguous increasing runs of `cores` as written: `0,1,4,5` -> `[[0, 1], [4, 5]]`."""
    runs: list[list[int]] = []
    for core in cores:
        if runs and core == runs[-1][-1] + 1:
            runs[-1].append(core)
        else:
            runs.append([core])
    return runs


def problem(cores: list[int], lnc: int) -> str | None:
    """Why this set (in the order written) cannot work under `lnc`, naming sets that would; None when it can."""
    named = sorted(set(cores))
    if len(_runs(cores)) > 1:
        runs = _runs(named)
        fix = (
            f"write it in increasing order, each core once: {render(named)}"
            if len(runs) == 1
            else f"use one run per process ({' or '.join(render(run) for run in runs[:3])}) "
            f"or {_span(named, lnc)} for all of them"
        )
        return (
            "not one contiguous run: the Neuron runtime takes logical NeuronCores in consecutive increasing "
            f"order (its invalid example is 3,5,6); {fix}"
        )
    if lnc != 2 or len(cores) == 1 or (cores[0] % 2 == 0 and len(cores) % 2 == 0):
        return None
    pairs = [render([c, c + 1]) for c in range(cores[0] - cores[0] % 2, cores[-1] + 1, 2)]
    return (
        "not made of whole pairs: the TRL Trainium guide lists 0,1, 2,3 and 0-3 as working and 1,2 as not "
        "(collectives), i.e. under LNC=2 (the default) a set of more than one logical core starts at an even "
        f"core and has an even count; use {' or '.join(pairs)}, {_span(named, lnc)} for all of them, or a single core"
    )


def _span(cores: list[int], lnc: int) -> str:
    """The one run covering every core named, in whole pairs under LNC=2: `0,2` -> `0-3` (LNC=1: `0-2`)."""
    first, last = cores[0], cores[-1]
    if lnc == 2:
        first, last = first - first % 2, last | 1
    return render(list(range(first, last + 1)))


def gpu_ids_problem(value: str, processes: int | None) -> str | None:
    """Why accelerate's `gpu_ids` (copied verbatim into NEURON_RT_VISIBLE_CORES) will not work."""
    found = parse(value)
    if found is None:
        return f"gpu_ids {value} is not a core list; accelerate copies it into NEURON_RT_VISIBLE_CORES (e.g. 0-3)"
    refused = problem(found, lnc=2)
    if refused:
        return f"accelerate copies gpu_ids {value} into NEURON_RT_VISIBLE_CORES, and it is {refused}"
    if processes is not None and len(found) < processes:
        wanted = render(list(range(processes + processes % 2 if processes > 1 else 1)))
        return (
            f"gpu_ids {value} is {len(found)} logical NeuronCore(s) but num_processes is {processes} (one core "
            f"each); accelerate copies gpu_ids into NEURON_RT_VISIBLE_CORES, use {wanted}"
        )
    return None
