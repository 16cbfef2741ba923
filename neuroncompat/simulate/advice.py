"""Which fix to suggest for a location that compiles many shapes, judged from how the shapes vary.

The report only knows shapes and where they came from, so the diagnosis reads the dimensions
that change between a location's signatures:

- a non-batch dimension that grows one at a time (129, 130, 131, …) is a decode loop whose
  sequence grows per token: a **static KV cache** fixes it;
- a non-batch dimension that takes scattered lengths is unpadded data: **pad_to_multiple_of=128**
  (at most max_length/128 shapes) or ``padding="max_length"`` (one shape); lengths that step by
  a multiple of 32 are already bucketed, and only ``padding="max_length"`` cuts them further;
- the batch dimension taking two sizes is a **smaller last batch**: ``dataloader_drop_last``.

Downstream graphs see derived sizes (labels shifted by one, batch x length flattened), hence
"steps by" rather than "is a multiple of", and a dimension 0 above 64 read as flattened tokens.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

# One tensor of a signature: (name, shape or None for a symbolic scalar, dtype).
Tensor = tuple[str, Sequence[int | str] | None, str]

# A decode loop shows at least this many consecutive lengths.
_GROWTH_RUN = 4
# Inputs named per finding.
_PLACES = 3
# Sizes that step by a multiple of this are already padded to a multiple (of the step), possibly
# shifted (labels are one shorter) or flattened (batch x length) on their way through the model.
_PAD_STEP = 32
# Dimension 0 is a batch when it is at most this; above, it is a flattened token count.
_MAX_BATCH = 64


@dataclass(frozen=True)
class Fix:
    id: str
    message: str


STATIC_CACHE = Fix(
    "static_cache",
    'use a static KV cache so every decode step has one shape: model.generate(..., cache_implementation="static") '
    'or cache_implementation="static" in GRPOConfig/RLOOConfig (the TRL Trainium guide; neuroncompat keeps the cache bf16)',
)
PAD_TO_MULTIPLE_OF = Fix(
    "pad_to_multiple_of",
    "pad every batch to a multiple of 128: pad_to_multiple_of=128 in the data collator or the TRL config "
    '(SFT, DPO, KTO, Reward, GRPO, RLOO; TRL\'s "auto" does it on Neuron): at most max_length/128 shapes',
)
PADDING_MAX_LENGTH = Fix(
    "padding_max_length",
    'pad to one length for a single shape: tokenizer(..., padding="max_length", max_length=N, truncation=True), '
    "or pad_to_multiple_of=max_length in the collator or the TRL config",
)
DROP_LAST = Fix(
    "dataloader_drop_last",
    "drop the smaller last batch: dataloader_drop_last=True (TrainingArguments, TRL configs) or DataLoader(..., drop_last=True)",
)
STATIC_SHAPES = Fix("static_shapes", "give this call inputs of one shape: pad or bucket them before the call")
DYNAMIC_SHAPES = Fix(
    "automatic_dynamic_shapes",
    "compile static graphs: torch._dynamo.config.automatic_dynamic_shapes = False or torch.compile(..., dynamic=False) "
    "(import neuroncompat sets the former)",
)


@dataclass(frozen=True)
class Diagnosis:
    """What varies between the signatures (one line each) and the fixes, most specific first."""

    findings: tuple[str, ...]
    fixes: tuple[Fix, ...]


def _longest_run(values: list[int]) -> int:
    best = run = 1
    for previous, current in zip(values, values[1:]):
        run = run + 1 if current == previous + 1 else 1
        best = max(best, run)
    return best


def _span(values: list[int]) -> str:
    return f"{len(values)} sizes, {values[0]}..{values[-1]}"


def _layout(signature: Sequence[Tensor]) -> tuple[tuple[str, int, str], ...]:
    """Names, ranks and dtypes: signatures with one layout differ only in sizes."""
    return tuple((name, len(shape) if shape is not None else 0, dtype) for name, shape, dtype in signature)


def diagnose(signatures: Sequence[Sequence[Tensor]]) -> Diagnosis:
    """Read how the static dimensions of ``signatures`` vary (the most common input layout only)."""
    layouts = [_layout(s) for s in signatures]
    layout = Counter(layouts).most_common(1)[0][0]
    group = [s for s, shape in zip(signatures, layouts) if shape == layout]
    # (is the batch dim, sizes) -> the "input dim" places that vary that way.
    varying: dict[tuple[bool, tuple[int, ...]], list[str]] = {}
    for index, (name, rank, _) in enumerate(layout):
        for dim in range(rank):
            # One layout, one rank: every signature in the group has a shape here (rank > 0).
            seen = {shape[dim] for _, shape, _ in (s[index] for s in group) if shape is not None}
            static = sorted(v for v in seen if isinstance(v, int))
            if len(seen) > 1 and len(static) == len(seen):
                batch = dim == 0 and rank > 1 and max(static) <= _MAX_BATCH
                varying.setdefault((batch, tuple(static)), []).append(f"{name} dim {dim}")
    findings: list[str] = []
    fixes: list[Fix] = []
    for (batch, values), places in sorted(varying.items(), key=lambda item: (item[0][0], -len(item[0][1]))):
        more = f" (+{len(places) - _PLACES} more)" if len(places) > _PLACES else ""
        which = ", ".join(places[:_PLACES]) + more
        sizes = list(values)
        if batch:
            if len(sizes) == 2:
                findings.append(f"{which} (batch): {sizes[0]} and {sizes[1]}, a smaller last batch")
                fixes.append(DROP_LAST)
            else:
                findings.append(f"{which} (batch): {_span(sizes)}")
                fixes.append(STATIC_SHAPES)
        elif _longest_run(sizes) >= _GROWTH_RUN:
            findings.append(f"{which}: {_span(sizes)}, growing one at a time as a sequence does per generated token")
            fixes.append(STATIC_CACHE)
        elif (step := math.gcd(*(b - a for a, b in zip(sizes, sizes[1:])))) % _PAD_STEP == 0:
            findings.append(f"{which}: {_span(sizes)}, in steps of {step}: already padded to a multiple")
            fixes.append(PADDING_MAX_LENGTH)
        else:
            findings.append(f"{which}: {_span(sizes)}, unpadded lengths")
            fixes.extend((PAD_TO_MULTIPLE_OF, PADDING_MAX_LENGTH))
    if not findings:
        findings.append("the calls pass different sets of tensors")
        fixes.append(STATIC_SHAPES)
    unique = tuple(dict.fromkeys(fixes))
    return Diagnosis(tuple(findings), unique)
