"""How many graphs Neuron would compile for the planned step under ``torch.compile``: Dynamo run on the fake model.

Dynamo traces Python on its own fake tensors, so it can tell a step's graphs without running it and without
weights: the planned model is compiled with the dry run's own ``neuron`` backend
(:func:`neuroncompat.simulator.compile_backend.neuron_backend`, what ``neuroncompat simulate`` records a
compilation with), and the step runs once on fake inputs. Each graph the backend records is one Neuron
compilation (a graph break splits the forward into several); the backward and the optimizer step are not
compiled by ``torch.compile(model)``, so they add none.

This is a pass of its own, after the memory trace: a compiled forward runs as FX code, which may free its
intermediates at other points than eager, and the memory figures are those of the eager step ``plan`` is checked
against (docs/plan.md).
"""

from __future__ import annotations

import warnings
from typing import Any

from torch._subclasses.fake_tensor import FakeTensorMode

from neuroncompat.plan import step
from neuroncompat.plan.settings import PlanInputError, PlanSettings
from neuroncompat.plan.trace import _one_sequence_per_row


def count(config: Any, settings: PlanSettings) -> dict[str, Any]:
    """The graphs of MODEL's step on one core: how many, and each one's function, op count and input count."""
    import torch._dynamo

    from neuroncompat.simulator import compile_backend

    recorded: list[Any] = []
    stop_listening = compile_backend.on_compile(recorded.append)
    torch._dynamo.reset()  # no graph cached from an earlier compile in this process counts, or is reused
    try:
        with warnings.catch_warnings(), FakeTensorMode(allow_non_fake_inputs=True), _one_sequence_per_row():
            warnings.simplefilter("ignore")
            model = step.build_model(config, settings, "cpu")
            compiled: Any = torch.compile(model, backend=compile_backend.neuron_backend)
            ids = step.input_ids(config, settings, "cpu")
            if settings.task == "train":
                step.train_step(compiled, step.build_optimizer(model, settings), ids, settings, lambda phase: None)
            else:
                step.generate_step(compiled, config, ids, settings, lambda phase: None)
    except Exception as exc:  # Dynamo could not trace the step on fake inputs: say so, the memory plan stands
        raise PlanInputError(
            f"--graphs: Dynamo could not trace this step on fake inputs: {type(exc).__name__}: {exc}"
        ) from exc
    finally:
        stop_listening()
        torch._dynamo.reset()
    return {
        "count": len(recorded),
        "graphs": [
            # a library's file named from its package, as the script's stops name one (transformers/...)
            {"code": graph.code.rpartition("-packages/")[2], "ops": graph.ops, "inputs": len(graph.inputs)}
            for graph in recorded
        ],
    }
