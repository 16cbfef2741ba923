"""The CUDA redirect's migration log in the ``neuroncompat simulate`` report.

With ``neuroncompat simulate --cuda-redirect`` (or ``NEURONCOMPAT_CUDA=redirect`` in the
environment) every process of the run writes its redirected call sites
(:mod:`neuroncompat.cuda.sites`) into a directory the command chooses; :func:`section` merges
them (one entry per site, with the ranks that ran it) and :func:`render_text` prints them
after the compile report. JSON: the report's ``"cuda_redirect"`` key::

    {"sites": [{"file": str, "line": int, "call": str, "became": str, "rule": str | null,
                "calls": int, "ranks": [int]}],
     "migrate_command": str | null}     # the neuron-migrate command that makes it permanent
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from neuroncompat.cuda.sites import Site, migrate_command


def load(directory: str | Path) -> list[dict[str, Any]]:
    """The per-process logs written into ``directory``, by rank then pid."""
    logs = [json.loads(path.read_text()) for path in Path(directory).glob("rank*.json")]
    return sorted(logs, key=lambda log: (log["rank"], log["pid"]))


def section(logs: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[tuple[str, int, str], dict[str, Any]] = {}
    for log in logs:
        for site in log["sites"]:
            key = (site["file"], site["line"], site["call"])
            entry = merged.setdefault(key, {**site, "calls": 0, "ranks": []})
            entry["calls"] += site["calls"]
            if log["rank"] not in entry["ranks"]:
                entry["ranks"].append(log["rank"])
    sites = [merged[key] for key in sorted(merged)]
    command = migrate_command([Site(s["file"], s["line"], s["call"], s["became"], s["rule"]) for s in sites])
    return {"sites": sites, "migrate_command": command}


def render_text(data: dict[str, Any]) -> str:
    sites = data["sites"]
    lines = [f"CUDA redirect: {len(sites)} call site(s) ran on Neuron instead of CUDA"]
    for site in sites:
        rule = f"  [{site['rule']}]" if site["rule"] else ""
        ranks = ",".join(str(r) for r in site["ranks"])
        lines.append(
            f"  {site['file']}:{site['line']}  {site['call']} -> {site['became']}{rule}"
            f"  (rank {ranks}, {site['calls']} call(s))"
        )
    if data["migrate_command"]:
        lines.append(f"  make it permanent: {data['migrate_command']}")
    return "\n".join(lines)
