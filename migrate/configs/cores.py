"""NeuronCore sets as written in `NEURON_RT_VISIBLE_CORES` and accelerate's `gpu_ids`.

Under the default logical-core size (LNC=2, `NEURON_LOGICAL_NC_CONFIG` unset or 2) a logical
NeuronCore is the physical pair {2k, 2k+1}, and the runtime only accepts sets made of whole
pairs: `0,1`, `2,3`, `0-3` are valid, `1,2` is not (docs/gaps.md#visible_cores). GPU `i`
of a CUDA script becomes logical core `i`, i.e. physical cores `2i,2i+1`: the same mapping the
shim's `visible_cores` patch prints, so a migrated launcher and the shim agree. Kept separate
from that patch because importing `neuroncompat` applies the shim.
"""

from __future__ import annotations

import re

_CORE_LIST = re.compile(r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*")


def parse(value: str) -> list[int] | None:
    """`"0,1"`, `"0-3"`, `"0-1,4-5"` -> sorted distinct indices; None when not a core list."""
    value = value.replace(" ", "")
    if not _CORE_LIST.fullmatch(value):
        return None
    cores: set[int] = set()
    for part in value.split(","):
        low, _, high = part.partition("-")
        if int(high or low) < int(low):
            return None
        cores.update(range(int(low), int(high or low) + 1))
    return sorted(cores)


def render(cores: list[int]) -> str:
    """`0-3` for a run of more than two, else `0,1` / `4,5,8,9`."""
    if len(cores) > 2 and cores == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(map(str, cores))


def from_gpus(gpus: list[int], lnc: int) -> str:
    """The physical NeuronCores standing in for these GPU ids."""
    return render(sorted(c for g in gpus for c in ((2 * g, 2 * g + 1) if lnc == 2 else (g,))))


def unaligned(cores: list[int], lnc: int) -> str | None:
    """Why this set is rejected under `lnc`, naming valid choices; None when it is valid."""
    if lnc != 2:
        return None
    lonely = [c for c in cores if c ^ 1 not in cores]
    if not lonely:
        return None
    choices = sorted({render([c & ~1, c | 1]) for c in cores}, key=lambda s: int(s.split(",")[0]))
    return (
        f"{render(cores)} is not a set of aligned core pairs: under LNC=2 (the default) each "
        f"logical NeuronCore is the physical pair 2k,2k+1 and {', '.join(map(str, lonely))} "
        f"lack their partner; use {' or '.join(choices)} (one logical core each) or 0-3 (two)"
    )


def gpu_ids_problem(value: str, processes: int | None) -> str | None:
    """Why accelerate's `gpu_ids` (copied verbatim into NEURON_RT_VISIBLE_CORES) will not work."""
    found = parse(value)
    if found is None:
        return f"gpu_ids {value} is not a core list; accelerate copies it into NEURON_RT_VISIBLE_CORES (e.g. 0-3)"
    problem = unaligned(found, lnc=2)
    if problem:
        return f"accelerate copies gpu_ids into NEURON_RT_VISIBLE_CORES: {problem}"
    if processes is not None and len(found) // 2 < processes:
        wanted = render(list(range(2 * processes)))
        return (
            f"gpu_ids {value} is {len(found) // 2} logical NeuronCore(s) under LNC=2 but num_processes is "
            f"{processes}; accelerate copies gpu_ids into NEURON_RT_VISIBLE_CORES, use {wanted}"
        )
    return None
