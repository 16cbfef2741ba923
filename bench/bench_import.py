"""What ``import neuroncompat`` costs a script off Neuron, and whether it stays free of torch.

``import neuroncompat`` goes first in every ported script, so the project targets < 30 ms over a
bare interpreter and no torch import (the shim attaches to torch through post-import hooks).

How: fresh interpreters, so nothing is already imported. ``python -c pass`` and
``python -c "import neuroncompat"`` run in turns (``--runs`` each per bytecode setting, default
20) and the median wall times are subtracted (the minimums too: on a shared machine they are the
figures least disturbed by other processes); taking turns spreads that load over all commands.
Two bytecode settings: "cached" lets Python write ``.pyc`` files (to a temporary
``PYTHONPYCACHEPREFIX``, not into the repository) after one untimed run, as an installed package
has them; "uncached" sets ``PYTHONDONTWRITEBYTECODE=1`` and no prefix, so neuroncompat's modules
are compiled from source on every run (unless a ``__pycache__`` already sits beside them), as in
an environment that sets that variable for an editable install. Then ``python -X importtime`` (median of 5 runs per module) lists the five
neuroncompat modules with the largest cumulative import time and the five modules outside the
package that it is first to import (they are most of the cost), and one more interpreter reports
whether ``torch`` (and ``transformers``) are in ``sys.modules`` after ``import neuroncompat``.
``NEURONCOMPAT_SIMULATE`` is removed from the children's environment: this measures off Neuron.

Run: ``python bench/bench_import.py [--runs 20] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field

os.environ["HF_HUB_OFFLINE"] = "1"

TARGET_MS = 30.0
IMPORTTIME_RUNS = 5
TOP = 5


def child_env(pycache_prefix: str | None) -> dict[str, str]:
    """The children's environment: off Neuron, with or without a bytecode cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_")}
    env.pop("PYTHONPYCACHEPREFIX", None)
    if pycache_prefix is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache_prefix
    return env


def wall_ms(code: str, env: dict[str, str]) -> float:
    """Wall time of one fresh interpreter running ``code``: startup and teardown included, as a user sees it."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return (time.perf_counter() - start) * 1e3


def import_costs(runs: int, envs: dict[str, dict[str, str]]) -> dict[str, dict[str, float]]:
    """Per bytecode setting: median and minimum wall time of a bare interpreter and of one
    importing neuroncompat. All four commands take turns, so load from other processes falls on
    each alike; the minimum is the figure least disturbed by that load."""
    for env in envs.values():
        wall_ms("import neuroncompat", env)  # untimed: fills the bytecode cache where there is one
    samples: dict[str, dict[str, list[float]]] = {mode: {"bare": [], "import": []} for mode in envs}
    for _ in range(runs):
        for mode, env in envs.items():
            samples[mode]["bare"].append(wall_ms("pass", env))
            samples[mode]["import"].append(wall_ms("import neuroncompat", env))
    result = {}
    for mode, by_command in samples.items():
        bare_med, imp_med = statistics.median(by_command["bare"]), statistics.median(by_command["import"])
        bare_min, imp_min = min(by_command["bare"]), min(by_command["import"])
        result[mode] = {
            "bare_ms": round(bare_med, 1),
            "import_ms": round(imp_med, 1),
            "cost_ms": round(imp_med - bare_med, 1),
            "bare_min_ms": round(bare_min, 1),
            "import_min_ms": round(imp_min, 1),
            "cost_min_ms": round(imp_min - bare_min, 1),
        }
    return result


@dataclass
class _Entry:
    """One ``-X importtime`` line; ``children`` are the modules it imported first."""

    name: str
    depth: int
    self_us: int
    cumulative_us: int
    children: list[_Entry] = field(default_factory=list)


def _parse_importtime(stderr: str) -> _Entry:
    """The ``neuroncompat`` import as a tree (the output is post-order: children come first)."""
    pending: dict[int, list[_Entry]] = defaultdict(list)
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, raw_name = line[len("import time:") :].split("|")
        depth = (len(raw_name) - len(raw_name.lstrip(" ")) - 1) // 2
        entry = _Entry(raw_name.strip(), depth, int(self_us), int(cum_us), pending.pop(depth + 1, []))
        if entry.name == "neuroncompat" and depth == 0:
            return entry
        pending[depth].append(entry)
    raise RuntimeError("no top-level 'neuroncompat' line in -X importtime output")


def _walk(entry: _Entry, own: dict[str, list[int]], external: dict[str, list[int]]) -> None:
    """Collect neuroncompat modules and the outside modules they pull in directly."""
    own[entry.name].append(entry.cumulative_us)
    for child in entry.children:
        if child.name.split(".")[0] == "neuroncompat":
            _walk(child, own, external)
        else:
            external[child.name].append(child.cumulative_us)


def importtime_top(env: dict[str, str]) -> dict[str, list[dict[str, object]]]:
    """Largest cumulative ``-X importtime`` (median of runs, microseconds): neuroncompat's own
    modules, and the modules outside it that they import first (stdlib, mostly), which is where
    the time goes."""
    own: dict[str, list[int]] = defaultdict(list)
    external: dict[str, list[int]] = defaultdict(list)
    for _ in range(IMPORTTIME_RUNS):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import neuroncompat"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        _walk(_parse_importtime(proc.stderr), own, external)

    def top(samples: dict[str, list[int]]) -> list[dict[str, object]]:
        rows = [{"module": name, "cumulative_us": int(statistics.median(us))} for name, us in samples.items()]
        return sorted(rows, key=lambda r: r["cumulative_us"], reverse=True)[:TOP]

    return {"neuroncompat": top(own), "pulled_in": top(external)}


def heavy_modules_loaded(env: dict[str, str]) -> dict[str, bool]:
    """Whether ``import neuroncompat`` pulled in torch or transformers (it must not, off Neuron)."""
    code = "import sys, json, neuroncompat; print(json.dumps({m: m in sys.modules for m in ('torch', 'transformers')}))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="interpreters per command and bytecode setting")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as prefix:
        cached_env = child_env(prefix)
        result = {
            "runs": args.runs,
            "python": sys.version.split()[0],
            "target_ms": TARGET_MS,
            **import_costs(args.runs, {"cached": cached_env, "uncached": child_env(None)}),
            "importtime_top": importtime_top(cached_env),
            "loaded_after_import": heavy_modules_loaded(cached_env),
        }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"import neuroncompat, off Neuron: median of {args.runs} fresh interpreters each, Python {result['python']}")
    print(
        f"{'bytecode':<10}{'bare ms':>9}{'import ms':>11}{'cost ms':>9}  < {TARGET_MS:.0f} ms?   min: bare / import / cost ms"
    )
    for mode in ("cached", "uncached"):
        r = result[mode]
        print(
            f"{mode:<10}{r['bare_ms']:>9.1f}{r['import_ms']:>11.1f}{r['cost_ms']:>9.1f}  {'yes' if r['cost_ms'] < TARGET_MS else 'no':<9}"
            f"{r['bare_min_ms']:>9.1f} / {r['import_min_ms']:.1f} / {r['cost_min_ms']:.1f}"
        )
    for key, title in (
        ("neuroncompat", "neuroncompat modules"),
        ("pulled_in", "outside modules neuroncompat imports first"),
    ):
        print(f"\n-X importtime, top {TOP} {title} (cumulative, cached bytecode, median of {IMPORTTIME_RUNS}):")
        for row in result["importtime_top"][key]:
            print(f"  {row['module']:<34}{row['cumulative_us'] / 1e3:>8.2f} ms")
    loaded = result["loaded_after_import"]
    print(f"\ntorch not in sys.modules after import neuroncompat: {'no' if loaded['torch'] else 'yes'}")
    print(f"transformers not in sys.modules after import neuroncompat: {'no' if loaded['transformers'] else 'yes'}")


if __name__ == "__main__":
    main()
