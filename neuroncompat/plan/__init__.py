"""``neuroncompat plan MODEL``: will a full-size step fit in a NeuronCore's memory? Answered from the config alone.

Before renting a trn2, a user porting a script wants to know whether the step fits. The plan builds MODEL from
its config on fake tensors (no weights, no real memory), runs one training step (forward, backward, optimizer
step) or one generation (prefill and a decode step on a static cache) under PyTorch's MemTracker, and reports
the peak per NeuronCore by category, the phase it falls in, the largest tensors, and a verdict against the
core's memory. One job per module: :mod:`.config` (MODEL to a config), :mod:`.settings`, :mod:`.step` (the step,
shared with the accuracy test that runs it for real on the simulated device), :mod:`.trace` (fake tensors and
MemTracker), :mod:`.parallel` (a TP x FSDP layout over a fake process group), :mod:`.layouts` (the table of
layouts over one instance), :mod:`.largest`, :mod:`.hardware` (each instance's core memory), :mod:`.graphs` (``--graphs``: the step's
torch.compile graphs), :mod:`.script` (``plan -- python train.py``) and :mod:`.report`;
docs/plan.md says what the plan does not model.
"""

from __future__ import annotations

from neuroncompat.plan import config as model_config
from neuroncompat.plan import layouts, report
from neuroncompat.plan.graphs import count as count_graphs
from neuroncompat.plan.hardware import CORES
from neuroncompat.plan.parallel import Layout
from neuroncompat.plan.script import plan_script
from neuroncompat.plan.settings import PlanInputError, PlanSettings
from neuroncompat.plan.trace import trace

__all__ = ["Layout", "PlanInputError", "PlanSettings", "plan", "plan_script"]


def plan(
    model: str,
    settings: PlanSettings,
    instance: str = "trn2",
    layout: Layout | None = None,
    table: bool = False,
    jobs: int = 1,
    graphs: bool = False,
) -> dict:
    """The plan document for MODEL's step on rank 0 of ``layout`` (neuroncompat/plan/report.py describes it).

    With ``table``, every layout over one instance's cores is searched (:mod:`.layouts`) and the document plans
    the smallest that fits (the one with the lowest peak when none does), with the table beside it. With
    ``graphs``, the step is also compiled by Dynamo on fake inputs and its graphs counted (:mod:`.graphs`)."""
    layout = layout or Layout()
    if settings.task == "generate" and layout.fsdp > 1:
        raise PlanInputError("--fsdp shards a training step's states; a generation plan takes --tp only")
    if table and (settings.task != "train" or layout.cores > 1):
        raise PlanInputError("--layouts searches the layouts of a training step; give it without --tp, --fsdp")
    if graphs and (layout.cores > 1 or table):
        raise PlanInputError(
            "--graphs counts the graphs of a step on one core in this version: give it without "
            "--tp, --fsdp or --layouts"
        )
    path, config = model_config.load(model)
    core = CORES[instance]
    if not table:
        document = report.build(model, path, config, settings, trace(config, settings, layout), core, layout)
        if graphs:
            document["graphs"] = count_graphs(config, settings)
        return document
    rows = layouts.search(config, settings, core.memory_bytes, core.instance_cores, jobs)
    best = layouts.smallest(rows, core.memory_bytes, settings.gradient_checkpointing) or min(
        rows, key=lambda row: row.traced(settings.gradient_checkpointing).peak_bytes
    )
    chosen = best.traced(settings.gradient_checkpointing)
    document = report.build(model, path, config, settings, chosen, core, best.layout)
    document["layouts"] = report.layout_table(rows, core)
    return document
