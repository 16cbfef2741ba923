"""Why a stage compiled a function more than once: Dynamo's failed guards, with the cause where one is known.

Each graph is a Neuron compilation on a trn2 (minutes for a real model), so a stage that compiles the same function
again is worth its reason. Dynamo keeps the guard that failed for every cache entry it tried before recompiling
(``torch._dynamo.utils.guard_failures``, cleared by ``torch._dynamo.reset()``, which ``check`` calls before each
stage), written as ``"0/1: <guard expression> == <value>  # <source> # <file>:<line> in <function>"``. The value
changes at each recompile; the guard and its source line say why.

Known cause: transformers' sliding-window static cache (``StaticSlidingWindowLayer``, Gemma 2/3, Mistral, GPT-OSS,
...) keeps its length as a Python int, ``cumulative_length_int``, and branches on it. Dynamo guards on the value,
so the decode step compiles once per token until the window fills, and after ``recompile_limit`` (8) compilations
runs uncompiled. transformers#44609 asked for a tensor instead; the request was not taken up (tt-xla replaced the
layer, tenstorrent/tt-xla#3688).
"""

from __future__ import annotations

import re
from typing import Any

from neuroncompat.simulate.locations import shorten

# "0/3: kwargs['past_key_values'].layers[0].cumulative_length_int == 5  # is_full = ...  # path.py:550 in update"
_REASON = re.compile(r"^\s*\d+/\d+:\s*(?P<guard>.*?)(?:\s+#.*)?$")
_VALUE = re.compile(r"\s*(==|!=|<=|>=|<|>)\s*[-\w.'\"()]+$")
_SITE = re.compile(r"#\s*(?P<file>[^#]*?\.py):(?P<line>\d+) in (?P<function>\w+)\s*$")

_CAUSES = {
    "cumulative_length_int": (
        "transformers' sliding-window static cache keeps its length as a Python int (StaticSlidingWindowLayer): the "
        "decode step compiles once per token until the window fills, and runs uncompiled past Dynamo's recompile "
        "limit (transformers#44609, not taken up)"
    ),
}


def recompiles() -> list[dict[str, Any]]:
    """The guards whose failure made Dynamo compile a function again since the last reset: one entry per guard
    expression (its value left out) and source line, ``count`` the values it failed with, ``cause`` where known."""
    from torch._dynamo.utils import guard_failures

    found: dict[tuple[str, str], dict[str, Any]] = {}
    for code, reasons in list(guard_failures.items()):
        function = f"{shorten(code.co_filename)}:{code.co_firstlineno} ({code.co_name})"
        for reason in reasons:
            first = str(reason).strip().splitlines()[0] if str(reason).strip() else ""
            match = _REASON.match(first)
            if match is None:
                continue
            value = _VALUE.search(match["guard"])
            guard = match["guard"][: value.start()].strip() if value else match["guard"].strip()
            site = _SITE.search(first)
            where = f"{shorten(site['file'])}:{site['line']} in {site['function']}" if site else function
            entry = found.setdefault((guard, where), {"guard": guard, "site": where, "function": function})
            # each recompile tries every graph cached before it: the values the guard held count the recompiles
            entry.setdefault("values", set()).add(value[0].strip() if value else "")
            cause = next((text for key, text in _CAUSES.items() if key in guard), None)
            if cause:
                entry["cause"] = cause
    out = [{**{k: v for k, v in e.items() if k != "values"}, "count": len(e["values"])} for e in found.values()]
    return sorted(out, key=lambda e: -e["count"])
