"""Graph breaks inside torch.compile'd code, from Dynamo's own report of each one.

A graph break splits a compiled step into several graphs (each one a Neuron compilation) with
the code between them run eagerly, op by op. Dynamo reports every break it takes through
``InstructionTranslatorBase.log_graph_break`` (what ``TORCH_LOGS=graph_breaks`` and
``torch._dynamo.explain`` print): the exception it carries names the kind of break (``gb_type``),
Dynamo's explanation, and the user stack where tracing stopped. :func:`install` wraps that method
to hand each break, once, to a listener with its site and user line (see
:mod:`~neuroncompat.simulate.locations`); Dynamo's own logging is unchanged. A torch without the
method (it is internal) records no breaks, and says so once on the ``neuroncompat`` logger.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat import hooks
from neuroncompat.simulate.advice import Fix
from neuroncompat.simulate.locations import caller_in, current_caller

logger = logging.getLogger("neuroncompat")

# (reason, site, user line)
Listener = Callable[[str, str | None, str | None], None]

# Dynamo runs the code after a break as a generated "resume" function named after the original.
_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<name>.+)_at_\d+$")
_EXPLANATION = re.compile(r"^\s*Explanation:\s*(?P<text>.+)$", re.MULTILINE)

PRINT_OR_LOG = Fix(
    "move_logging_out",
    "move the print/logging out of the compiled function (log after the step, or from a callback), or list the "
    "function in torch._dynamo.config.reorderable_logging_functions",
)
HOST_VALUE = Fix(
    "keep_on_device",
    "keep the value on the device: no .item()/.tolist()/Python if on a tensor inside the step; "
    "use torch.where for the branch and read values after the step",
)
DATA_DEPENDENT = Fix(
    "static_shape_rewrite",
    "rewrite with static shapes (torch.where, a mask, padding to a fixed size) so the step is one graph",
)
UNTRACEABLE = Fix(
    "move_out_of_step",
    "move this call out of the compiled function, or rewrite it so Dynamo can trace it (the reason says what "
    "it could not); each break adds a graph and runs the code between graphs eagerly",
)


def fix_for(reason: str) -> Fix:
    """The fix for a break, from Dynamo's reason."""
    text = reason.lower()
    if "print" in text or "logging" in text or "logger" in text:
        return PRINT_OR_LOG
    if "item()" in text or "tolist" in text or "data-dependent" in text or "data dependent" in text:
        return HOST_VALUE if "item()" in text or "tolist" in text else DATA_DEPENDENT
    if "dynamic shape operator" in text or "dynamic_output_shape" in text:
        return DATA_DEPENDENT
    return UNTRACEABLE


def condense(reason: str, exc: Any) -> str:
    """``gb_type: explanation`` (Dynamo's name for the break and its one-line explanation)."""
    gb_type = getattr(exc, "gb_type", None)
    explanation = _EXPLANATION.search(reason)
    head = gb_type or next((line.strip() for line in reason.splitlines() if line.strip()), "graph break")
    return f"{head}: {explanation['text'].strip()}" if explanation else head


def _frames(exc: Any) -> list[tuple[str, int, str]]:
    from torch._guards import TracingContext

    stack = getattr(exc, "real_stack", None)
    if stack is None:
        stack = TracingContext.extract_stack()
    frames = []
    for summary in stack or ():
        resumed = _RESUME.match(summary.name)
        frames.append((summary.filename, summary.lineno or 0, resumed["name"] if resumed else summary.name))
    return frames


def install(listener: Listener) -> Callable[[], None]:
    """Call ``listener`` for each graph break Dynamo reports; returns the undo.

    Dynamo is wrapped when it is imported (now, if it is): importing it costs about 1.5 s of CPU, and a run that
    never compiles, common under ``neuroncompat simulate``, has no graph break to report.
    """
    undo: list[Callable[[], None]] = []
    wanted = [True]

    def wrap(_symbolic_convert: ModuleType) -> None:
        if wanted:
            undo.append(_wrap(listener))

    hooks.when_imported("torch._dynamo.symbolic_convert", wrap, keep=True)

    def remove() -> None:
        wanted.clear()
        while undo:
            undo.pop()()

    return remove


def _wrap(listener: Listener) -> Callable[[], None]:
    """Wrap Dynamo's graph-break log to call ``listener``; returns the undo."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslatorBase

        original = InstructionTranslatorBase.log_graph_break
    except (ImportError, AttributeError):
        logger.warning(
            "neuroncompat simulate: this torch has no InstructionTranslatorBase.log_graph_break; "
            "graph breaks are not reported"
        )
        return lambda: None

    def log_graph_break(self: Any, code_options: Any, reason: str, exc: Any) -> None:
        if not getattr(exc, "logged", False):
            try:
                site_at, user_at = caller_in(_frames(exc))
                if user_at is None:  # the break is in library code: the user's line is above the compiled call
                    user_at = current_caller()[1]
                listener(condense(reason, exc), site_at, user_at)
            except Exception:  # noqa: BLE001 - the report must never break the user's compile
                logger.debug("neuroncompat simulate: could not record a graph break", exc_info=True)
        return original(self, code_options, reason, exc)

    InstructionTranslatorBase.log_graph_break = log_graph_break  # type: ignore[method-assign]

    def undo() -> None:
        InstructionTranslatorBase.log_graph_break = original  # type: ignore[method-assign]

    return undo
