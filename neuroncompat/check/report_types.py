"""The records of ``neuroncompat check --format json``, from which its published schema is generated.

``report.schema.json`` beside this module (shipped in the package) is ``neuroncompat_report.schema``'s rendering
of :class:`CheckReport`; ``tests/test_report_schemas.py`` fails when the two differ, so a field added to the report
is added here and the file regenerated, never edited by hand:
``python -m neuroncompat_report.schema . neuroncompat.check.report_types:PUBLISHED``.
Within ``neuroncompat.check/1`` fields are only added, never removed or changed in meaning.
"""

from __future__ import annotations

import sys
from typing import Annotated, Literal

if sys.version_info >= (3, 11):
    from typing import NotRequired, TypedDict
else:  # typing's TypedDict knows NotRequired from 3.11; torch installs typing_extensions
    from typing_extensions import NotRequired, TypedDict

from neuroncompat_report.schema import Field, Published

StageName = Literal["load", "generate", "train-eager", "train-compiled", "tensor-parallel"]
Location = Annotated[str | None, Field("`path:line`, or null when no frame matched.")]


class StageFinding(TypedDict):
    """What the dry run's recorder saw during a stage, at one site."""

    kind: Literal["graph_break", "data_dependent", "cpu_fallback", "complex_on_device", "fp64_on_device"]
    what: Annotated[str, Field("The op, or Dynamo's reason for a graph break.")]
    site: Location
    count: Annotated[int, Field(minimum=1)]


class Recompile(TypedDict):
    """Why Dynamo compiled a function again during a stage: one entry per failed guard expression (its value left
    out) and source line."""

    guard: Annotated[str, Field("The guard that failed, as Dynamo writes it, without the value it compared.")]
    site: Annotated[str, Field("The source line that installed the guard: path:line in function.")]
    function: Annotated[str, Field("The function compiled again: path:first line (name).")]
    count: Annotated[
        int,
        Field(
            "How many values the guard failed with: the recompiles it caused (Dynamo tries every cached graph before "
            "compiling another, so the same value fails several).",
            minimum=1,
        ),
    ]
    cause: NotRequired[Annotated[str, Field("The cause, where it is known.")]]


class _Stage(TypedDict):
    stage: StageName


class _Measured(_Stage):
    """What every stage that ran records, whatever its result."""

    seconds: Annotated[float, Field(minimum=0)]
    graphs: Annotated[
        int,
        Field("Graphs the neuron backend compiled during the stage: each a Neuron compilation on a trn2.", minimum=0),
    ]
    graph_triggers: Annotated[list[str], Field("Where those compilations were triggered, deduplicated.")]
    findings: Annotated[list[StageFinding], Field("What the dry run's recorder saw during the stage.")]
    patches: Annotated[list[str], Field("Ids of the shim patches that acted during the stage.")]
    recompiles: NotRequired[
        Annotated[
            list[Recompile],
            Field(
                "Why Dynamo compiled a function again during the stage (each graph is a Neuron compilation on a trn2)."
            ),
        ]
    ]


class PassedStage(_Measured):
    """A stage whose device run matched the CPU's."""

    status: Literal["pass"]
    detail: Annotated[str, Field("What passed: the tokens equal, the losses compared.")]


class FailedStage(_Measured):
    """A stage that failed: on the device (fail), or on the CPU too (cpu-fails: the same tiny model fails there, so the
    stage gives no Neuron verdict)."""

    status: Literal["fail", "cpu-fails"]
    error: Annotated[
        str,
        Field("The first error: `ExceptionType: first line` (with the error Dynamo wrapped, where it wrapped one)."),
    ]
    model_line: Annotated[
        str | None, Field("The innermost frame of the model's own code (transformers/models/...): `path:line` or null.")
    ]
    innermost: Annotated[str | None, Field("The innermost frame of the error: `path:line` or null.")]


class SkippedStage(_Measured):
    """A stage with nothing to check in this model (tensor-parallel where the config has no tensor-parallel plan)."""

    status: Literal["skipped"]
    detail: Annotated[str, Field("Why the stage was skipped.")]


class NotLoadedStage(_Stage):
    """A stage after a load that failed: not run."""

    status: Literal["skipped"]
    detail: Annotated[str, Field("Why the stage was skipped: the model did not load.")]


Stage = PassedStage | FailedStage | SkippedStage | NotLoadedStage


class CheckReport(TypedDict):
    """One document per checked model: the stages run on a tiny random model of its architecture on the simulated
    Neuron device, each compared with the CPU. Source locations are `path:line`, paths relative to site-packages.
    Within neuroncompat.check/1 fields are only added, never removed or changed in meaning."""

    schema: Literal["neuroncompat.check/1"]
    model: Annotated[str, Field("MODEL as given: a directory, a config.json or a hub id.")]
    architecture: Annotated[
        str, Field("The model class checked (the config's first architecture), e.g. LlamaForCausalLM.")
    ]
    model_type: str
    dtype: Annotated[
        str,
        Field("The config's dtype without `torch.`, e.g. float32 or bfloat16: the dtype the tiny model runs in."),
    ]
    layers: Annotated[
        int | None,
        Field(
            "Layers of the tiny model (of its language model, for a multimodal one): the fewest that keep every kind "
            "of layer of the full model; null where the config names no depth of its own (BLT's byte-level "
            "sub-models) or the model does not build from its config.",
            minimum=1,
        ),
    ]
    parameters: Annotated[
        int,
        Field(
            "Parameters of the tiny model; 0 where it does not build from its config (the load stage says why).",
            minimum=0,
        ),
    ]
    seconds: Annotated[
        float, Field("This model's check in the worker process, without the process's start.", minimum=0)
    ]
    stages: Annotated[
        list[Stage],
        Field(
            "load, generate, train-eager, train-compiled, in that order; then tensor-parallel with --tensor-parallel "
            "(2 ranks under torchrun; its graphs and findings, in the ranks' processes, are not recorded)."
        ),
    ]
    exit_code: Annotated[
        Literal[0, 1],
        Field(
            "neuroncompat check's exit status: 0 when every stage passed or was skipped (tensor-parallel without a "
            "plan), 1 otherwise."
        ),
    ]


PUBLISHED = Published(
    CheckReport,
    "neuroncompat/check/report.schema.json",
    "https://neuroncompat.invalid/schemas/neuroncompat-check-report-1.json",
    "neuroncompat check --format json report, schema neuroncompat.check/1",
)
