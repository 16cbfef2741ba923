"""The records of ``neuroncompat simulate --format json``, from which ``docs/simulate-report.schema.json`` is generated.

The schema file is ``neuroncompat_report.schema``'s rendering of :class:`SimulateReport`;
``tests/test_report_schemas.py`` fails when the two differ, so a field added to the report is added here and the
file regenerated, never edited by hand: ``python -m neuroncompat_report.schema .
neuroncompat.simulate.report_types:PUBLISHED``. Only the generator and the tests import this module.
"""

from __future__ import annotations

import sys
from typing import Annotated, Literal

from neuroncompat_report.schema import Field, Published

if sys.version_info >= (3, 11):
    from typing import NotRequired, TypedDict
else:  # typing's TypedDict knows NotRequired from 3.11; torch installs typing_extensions
    from typing_extensions import NotRequired, TypedDict

Location = Annotated[str | None, Field("`path:line (function)`, or null when unknown.")]
StrictKind = Literal[
    "rejected",
    "shape_churn",
    "graph_break",
    "data_dependent",
    "cpu_fallback",
    "complex_on_device",
    "fp64_on_device",
    "int64_on_device",
    "step_recompile",
]
Count = Annotated[int, Field(minimum=0)]
Positive = Annotated[int, Field(minimum=1)]


class Fix(TypedDict):
    id: str
    message: str


class Violation(TypedDict):
    rank: int
    kind: StrictKind
    where: str
    what: str


class Strict(TypedDict):
    kinds: Annotated[list[StrictKind], Field("The kinds --strict fails on; empty when strict is off.")]
    violations: list[Violation]


class PipelineLatents(TypedDict):
    """With more than one rank running diffusers pipelines: whether every rank drew the same initial latents in each
    call (tensor parallelism needs it)."""

    ranks: list[int]
    calls: Count
    identical: bool
    differ_in_calls: Annotated[list[Positive], Field("Call numbers (1-based, per rank) whose latents differ.")]
    fix: Fix | None


class GraphInput(TypedDict):
    shape: Annotated[
        list[int | str] | None, Field("Sizes; a string is a symbolic (dynamic) size; null for a non-tensor.")
    ]
    dtype: str
    dynamic: bool
    name: NotRequired[
        Annotated[
            str | None,
            Field("The argument as the user's code names it (input_ids, self.model.embed_tokens.weight)."),
        ]
    ]
    parameter: NotRequired[Annotated[bool, Field("A module parameter or buffer.")]]


class Graph(TypedDict):
    signature: str
    compile_id: str
    ops: Count
    rejected: bool
    inputs: list[GraphInput]


class CompiledGroup(TypedDict):
    code: Annotated[str, Field("The compiled function (through decorator wrappers).")]
    site: str
    user: Location
    graphs: list[Graph]


class EagerInput(TypedDict):
    name: str
    shape: list[int]
    dtype: str


class EagerShape(TypedDict):
    inputs: list[EagerInput]
    calls: Positive


class EagerEntry(TypedDict):
    module: str
    site: Location
    user: Location
    calls: Count
    shapes: list[EagerShape]
    dropped_shapes: Count


class ShapeWarning(TypedDict):
    kind: Literal["recompiles", "eager_shapes", "rejected"]
    where: str
    site: Location
    user: Location
    shapes: Positive
    findings: list[str]
    fixes: list[Fix]


class Finding(TypedDict):
    kind: Literal[
        "graph_break", "data_dependent", "cpu_fallback", "complex_on_device", "fp64_on_device", "int64_on_device"
    ]
    what: Annotated[
        str,
        Field(
            "Dynamo's reason (graph_break), the ATen operator (aten::name.overload), or the input's name "
            "(int64_on_device)."
        ),
    ]
    description: str
    where: Annotated[str, Field("The user's line, else the library line.")]
    site: Location
    user: Location
    graph: Annotated[str | None, Field("The signature of the compiled graph the op ran in; null when eager.")]
    count: Positive
    owner: Annotated[
        str | None,
        Field(
            "The package whose code holds the finding (e.g. `trl`) when it is not the user's code: the fix is for "
            "that package; null in the user's code."
        ),
    ]
    fix: Fix
    references: list[str]
    unknown: NotRequired[
        Annotated[
            str | None,
            Field(
                "What TorchNeuron does not document about this finding (dtype kinds); null where nothing is unknown."
            ),
        ]
    ]
    informational: NotRequired[
        Annotated[
            bool,
            Field(
                "Needs no change in the common case (int64 on the device while the values fit in int32): counted, "
                "not listed, by the text report (--show-info lists it), never an annotation, and not one of the "
                "verdict's findings to act on."
            ),
        ]
    ]


class HubKernel(TypedDict):
    layer: Annotated[str, Field("The name the layer is registered under (use_kernel_forward_from_hub).")]
    module: Annotated[str, Field("The model's layer class.")]
    kernel: Annotated[str, Field("The kernel layer class whose forward replaced it.")]
    repo: Annotated[str, Field("The Hub repo id (or local path) the kernel came from.")]
    layers: Annotated[
        int,
        Field("How many layer replacements kernelize made with it (each layer, once per kernelize call).", minimum=1),
    ]


class LaterStep(TypedDict):
    step: Annotated[int, Field(minimum=2)]
    count: Positive


class PhaseCounts(TypedDict):
    total: Count
    before_denoising: Annotated[int, Field("Before the denoiser's first forward (text encoders).", minimum=0)]
    step_1: Count
    later_steps: Annotated[list[LaterStep], Field("Compiled after step 1: a bug (something changes per step).")]
    after_denoising: Annotated[int, Field("After the last scheduler step (vae.decode).", minimum=0)]


class PipelineParams(TypedDict, total=False):
    height: int | None
    width: int | None
    default_size: bool
    batch: int | None
    num_images_per_prompt: int | None
    cfg: bool | None
    guidance_scale: float | None
    true_cfg_scale: float | None
    steps: int | None
    max_sequence_length: int | None
    output_type: str | None
    prompt_length: int | None


class CallGraph(TypedDict):
    what: str
    ops: int
    phase: Literal["before", "step", "after"]
    step: int | None


class Cause(TypedDict):
    param: Literal["first_call", "unexplained", "size", "batch", "num_images_per_prompt", "cfg", "prompt_length"]
    before: str | None
    after: str | None
    why: str
    fix: Fix | None


class Vae(TypedDict):
    decode_ran: bool
    decode_compiled: bool
    module_compiled: Annotated[
        bool, Field("pipe.vae is a torch.compile'd module (its forward, which pipelines never call).")
    ]
    decode_ops: int | None
    tiling: bool
    slicing: bool
    device: str | None


class TextEncoder(TypedDict):
    name: str
    device: str | None
    calls: Count


class Note(TypedDict):
    what: str
    fix: Fix


class PipelineCall(TypedDict):
    index: Positive
    pipeline: Annotated[str, Field("The pipeline class.")]
    user: Location
    failed: bool
    params: Annotated[
        PipelineParams,
        Field(
            "The call's parameters; null where unknown. height/width are the pipeline's default where default_size; "
            "batch is the number of prompts; cfg whether classifier-free guidance ran; prompt_length the text "
            "embeddings' length the denoiser saw.",
            open=True,
        ),
    ]
    steps_run: Count
    new_graphs: PhaseCounts
    new_eager_shapes: PhaseCounts
    graphs: Annotated[
        list[CallGraph], Field("The graphs compiled during the call: the compiled function, its ops, when.")
    ]
    compared_with: Annotated[
        int | None,
        Field("The earlier call of the same pipeline whose parameters are closest (the causes are the differences)."),
    ]
    causes: list[Cause]
    later_step_compiles: Annotated[list[str], Field("What compiled after step 1 (compiled functions, eager modules).")]
    later_step_fix: Fix | None
    vae: Vae | None
    text_encoders: list[TextEncoder]
    latents: Annotated[str | None, Field("A hash of the initial latents (prepare_latents).")]
    notes: list[Note]


class Rank(TypedDict):
    rank: Count
    pid: int
    world_size: Positive
    compiled_graphs: Count
    rejected_graphs: Count
    eager_shapes: Count
    estimated_compile_seconds: Annotated[float, Field(minimum=0)]
    compiled: list[CompiledGroup]
    eager: list[EagerEntry]
    dropped_calls: Count
    device_allocations: NotRequired[
        Annotated[
            int,
            Field(
                "allocations made on this rank's NeuronCores (the allocator's cumulative count, all cores); absent "
                "from reports written before it was recorded",
                minimum=0,
            ),
        ]
    ]
    warnings: list[ShapeWarning]
    graph_breaks: Annotated[int, Field("Distinct graph-break findings.", minimum=0)]
    data_dependent_ops: Count
    cpu_fallback_ops: Count
    dtype_findings: NotRequired[
        Annotated[int, Field("Distinct complex_on_device, fp64_on_device and int64_on_device findings.", minimum=0)]
    ]
    findings: list[Finding]
    dropped_findings: Count
    hub_kernels: NotRequired[
        Annotated[
            list[HubKernel],
            Field(
                'Layer classes kernelize replaced with a Neuron kernel\'s forward (a "neuron" layer mapping); the '
                "simulator ran each layer's own forward. Absent from reports written before it was added."
            ),
        ]
    ]
    pipeline_calls: NotRequired[
        Annotated[list[PipelineCall], Field("Each outermost diffusers pipeline call, in order.")]
    ]


class SimulateReport(TypedDict):
    """One document per run. Locations are `path:line (function)`, paths relative to site-packages, the standard
    library or the working directory. Within neuroncompat.simulate/1 fields are only added, never removed or changed
    in meaning."""

    schema: Literal["neuroncompat.simulate/1"]
    command: Annotated[list[str], Field("The command as given after --.")]
    exit_code: Annotated[int, Field("The script's own exit code (a signal death as 128 + signal).")]
    simulate_exit_code: Annotated[
        int,
        Field(
            "neuroncompat simulate's exit status: exit_code when it is not 0, else 4 when strict.violations is not "
            "empty, else 0."
        ),
    ]
    graph_cost_seconds: Annotated[float, Field(minimum=0)]
    max_shapes: Positive
    estimated_compile_seconds: Annotated[
        float, Field("The slowest rank's estimate (ranks compile in parallel).", minimum=0)
    ]
    missing_ranks: Annotated[list[Count], Field("Ranks of WORLD_SIZE that wrote no record (killed).")]
    strict: Strict
    ranks: list[Rank]
    pipeline_latents: NotRequired[
        Annotated[PipelineLatents | None, Field("Whether every rank drew the same initial latents; null otherwise.")]
    ]


PUBLISHED = Published(
    SimulateReport,
    "docs/simulate-report.schema.json",
    "https://neuroncompat.invalid/schemas/neuroncompat-simulate-report-1.json",
    "neuroncompat simulate --format json report, schema neuroncompat.simulate/1",
)
