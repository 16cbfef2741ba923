"""What a cold build of the simulated device's C++ costs: compiler CPU time per file, and wall time by core count.

The backend is one ``.cpp`` per capability (``neuroncompat/simulator/native/``), and each file that includes
torch's headers parses them again, so splitting costs compiler CPU time; ``native_device`` compiles the files
in parallel, which wins it back in wall time where there are cores. A user's first ``simulator.enable()``
waits for this build, so the split has to stay near the single file's wall time on 2 cores.

How: every file is compiled with the build's own command (``native_device._compile_command``), one after
another so each figure is that compile's own CPU time (the children's ``getrusage``), which other processes'
load disturbs far less than the wall clock; then the link. The wall time on N idle cores is the build's
schedule replayed on those figures: the files start in the build's order (``native_device._units``), each on
the core that frees up first, then the link. ``--rounds`` repeats it and reports each file's median.

Run: ``python bench/bench_native_build.py [--rounds 1] [--cores 1,2,4] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
from pathlib import Path

from neuroncompat.simulator import native_device

LINK = "(link)"


def _cpu_seconds(command: list[str]) -> float:
    """CPU time (user + system) of one compiler run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(build: Path) -> dict[str, float]:
    """Each file's compile, then the link, by name."""
    seconds = {unit.name: _cpu_seconds(native_device._compile_command(unit, build)) for unit in native_device._units()}
    objects = [build / f"{unit.stem}.o" for unit in native_device._units()]
    seconds[LINK] = _cpu_seconds(native_device._link_command(objects, build / "neuron_device.so"))
    return seconds


def wall_on(cores: int, seconds: dict[str, float]) -> float:
    """The build's wall time on ``cores`` idle cores: files in the build's order, each on the first free core."""
    free = [0.0] * cores
    for name, cpu in seconds.items():
        if name != LINK:
            free[free.index(min(free))] += cpu
    return max(free) + seconds[LINK]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="builds to measure (each file's median is reported)")
    parser.add_argument("--cores", default="1,2,4", help="core counts to replay the build's schedule on")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    rounds: list[dict[str, float]] = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            rounds.append(measure(Path(tmp)))
    seconds = {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}
    walls = {int(n): wall_on(int(n), seconds) for n in args.cores.split(",")}
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"cpu_seconds": seconds, "wall_seconds_on_cores": walls, "load_average": load}, indent=2))
        return
    for name, cpu in seconds.items():
        print(f"{name:24} {cpu:6.1f} s")
    print(f"{'total CPU':24} {sum(seconds.values()):6.1f} s")
    for cores, wall in walls.items():
        print(f"{f'wall on {cores} core(s)':24} {wall:6.1f} s")
    print(f"load average {load:.2f} at the end, {args.rounds} round(s)")


if __name__ == "__main__":
    main()
