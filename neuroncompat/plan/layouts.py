"""The layouts of a training step over one instance's cores: each TP x FSDP traced, and the smallest that fits.

A user who finds that the step does not fit one core asks how many cores it needs and how to split them. Each
layout is traced as ``plan --tp T --fsdp F`` traces it (nothing is extrapolated), twice: without and with
gradient checkpointing, so the table says what checkpointing changes.

Affordable because the search stops early: layouts are tried by core count (1, 2, 4, ... up to the instance's),
every TP x FSDP split of a count together, and the search ends at the first count at which a layout fits in both
columns; a layout over more cores shards the same step further. TP sizes are the powers of two that divide the
model's attention and key-value heads (each rank holds whole heads). Traces can run in ``jobs`` worker
processes: each trace is independent, and a fake process group is per process.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from dataclasses import dataclass, replace
from typing import Any

from neuroncompat.plan.parallel import Layout
from neuroncompat.plan.settings import PlanSettings
from neuroncompat.plan.trace import Trace, trace


@dataclass
class Row:
    """One layout's rank-0 step traced without (``plain``) and with gradient checkpointing (``checkpointed``)."""

    layout: Layout
    plain: Trace
    checkpointed: Trace

    def traced(self, checkpointed: bool) -> Trace:
        return self.checkpointed if checkpointed else self.plain


def candidates(config: Any, cores: int) -> list[Layout]:
    """Every TP x FSDP over at most ``cores`` cores, by core count, then TP size."""
    heads = [getattr(config, f, None) for f in ("num_attention_heads", "num_key_value_heads")]
    layouts = []
    count = 1
    while count <= cores:
        tp = 1
        while tp <= count:
            if all(not isinstance(h, int) or h % tp == 0 for h in heads):
                layouts.append(Layout(tp=tp, fsdp=count // tp))
            tp *= 2
        count *= 2
    return layouts


def search(config: Any, settings: PlanSettings, memory_bytes: int, cores: int, jobs: int = 1) -> list[Row]:
    """Trace the layouts by core count until, at some count, a layout fits both without and with checkpointing;
    the rows traced, by core count."""
    plain = replace(settings, gradient_checkpointing=False)
    checkpointed = replace(settings, gradient_checkpointing=True)
    by_count: dict[int, list[Layout]] = {}
    for layout in candidates(config, cores):
        by_count.setdefault(layout.cores, []).append(layout)
    rows: list[Row] = []
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no fork of torch's threads
    with (
        concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) if jobs > 1 else _Inline() as pool
    ):
        for layouts in by_count.values():
            without = [pool.submit(trace, config, plain, layout) for layout in layouts]
            with_ = [pool.submit(trace, config, checkpointed, layout) for layout in layouts]
            done = [Row(lay, p.result(), c.result()) for lay, p, c in zip(layouts, without, with_, strict=True)]
            rows += done
            if all(any(row.traced(ckpt).peak_bytes <= memory_bytes for row in done) for ckpt in (False, True)):
                break
    return rows


class _Inline:
    """The executor interface, run in this process (``jobs=1``: no worker to start)."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Any, *args: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_result(fn(*args))
        return future


def smallest(rows: list[Row], memory_bytes: int, checkpointed: bool) -> Row | None:
    """The fitting layout over the fewest cores (the least TP among equals: fewer collectives per layer)."""
    fitting = [row for row in rows if row.traced(checkpointed).peak_bytes <= memory_bytes]
    return min(fitting, key=lambda row: (row.layout.cores, row.layout.tp), default=None)
