"""The ``neuroncompat`` command: ``doctor``, ``run``, ``simulate`` (the dry run that counts Neuron compilations) and
``check`` (will this architecture run on Trainium)."""

# ruff: noqa: E402 (the CUDA redirect is held before the imports below bring torch in: see hold_in_launcher)

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

import neuroncompat
from neuroncompat import cuda as cuda_redirect

cuda_redirect.hold_in_launcher()

from neuroncompat import doctor as doctor_report
from neuroncompat.runner import main as run_script
from neuroncompat.simulate import settings as simulate_settings
from neuroncompat.simulate.kinds import (
    DEFAULT_GRAPH_COST,
    DEFAULT_MAX_SHAPES,
    FALLBACK_ENV,
    STRICT_EXIT_CODE,
    STRICT_KINDS,
)
from neuroncompat_report.exits import Failure, Group, InputError

EPILOG = """\b
Examples:
  neuroncompat doctor                            what this machine has (paste it into a bug report)
  neuroncompat simulate -- python train.py       dry-run a script on the simulated Neuron device
  neuroncompat check path/to/model              will this architecture run on Trainium?
  neuroncompat plan path/to/model --seq-len 2048 will a full-size training step fit a NeuronCore?

\b
Exit codes: 0 ok, 1 changes needed, a stage failed or the step does not fit,
2 usage or input error, 130 interrupted; COMMAND --help says more.
"""


@click.group(
    cls=Group,
    help="Run Hugging Face scripts natively on AWS Trainium (TorchNeuron). Exit statuses, for every command: "
    "0 passed, 1 a stage or the script failed (plan: the step does not fit), 2 a usage or input error (in the chosen --format), 130 interrupted.",
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every subcommand
    epilog=EPILOG,
)
@click.version_option(
    neuroncompat.__version__, "--version", "-V", prog_name="neuroncompat", message="%(prog)s %(version)s"
)
def main() -> None:
    pass


@main.command(
    help="A block to paste into a bug report: Python, OS, C++ compiler, cache directory, torch build, library "
    "versions, Neuron detection, and each patch's state."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (docs/doctor.schema.json).")
@click.option("--verbose", "-v", is_flag=True, help="List every patch, also where none can apply (off Neuron).")
def doctor(as_json: bool, verbose: bool) -> None:
    from neuroncompat import cuda

    cuda.stand_down_in_launcher()
    if as_json:
        import json

        click.echo(json.dumps(doctor_report.data(), indent=2))
        return
    for line in doctor_report.report(verbose):
        click.echo(line)


@main.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    help="Run SCRIPT with the shim applied (same as python -m neuroncompat SCRIPT).",
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED, required=True)
def run(argv: tuple[str, ...]) -> None:
    cuda_redirect.resume_in_launcher()
    run_script(list(argv))


def _check_fallback_ops(configured: simulate_settings.Settings, given: tuple[str, ...]) -> None:
    """Refuse a CPU-fallback operator name that matches no operator of the installed torch: watching
    it would report nothing, and the run would look clean."""
    import torch

    from neuroncompat.simulate.op_findings import unknown_operators

    def cause(unknown: list[str]) -> str:
        return (
            f"{', '.join(unknown)}: no such operator in torch {torch.__version__} (expected aten::NAME or "
            "aten::NAME.OVERLOAD, as torch.ops.aten names them, e.g. aten::layer_norm, aten::add.Tensor)"
        )

    unknown = unknown_operators(given)
    if unknown:
        raise click.BadParameter(cause(unknown), param_hint="--cpu-fallback-op")
    unknown = unknown_operators(configured.cpu_fallback_ops)
    if unknown:
        raise click.UsageError(str(simulate_settings.cpu_fallback_ops_error(configured, cause(unknown))))


@main.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    help=(
        "Dry-run COMMAND (python|torchrun|accelerate launch SCRIPT ARGS...) on the simulated Neuron device with the "
        "shim, then report per rank the graphs Neuron would compile, where each recompile came from, the compile "
        "time they would cost on hardware, graph breaks, data-dependent-shape ops and CPU-fallback ops at your lines, "
        "and the fix for each. Exits with the script's exit code when it fails (the report is printed anyway), "
        f"else {STRICT_EXIT_CODE} when --strict finds a selected kind, else 0. Defaults come from "
        "[tool.neuroncompat.simulate] in pyproject.toml."
    ),
)
@click.option(
    "--cores",
    type=click.IntRange(min=1),
    default=None,
    help="Simulated NeuronCores [default: 2, or one per local process].",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "github"]),
    default="text",
    show_default=True,
    help="Report format (markdown: a PR comment; github: Actions annotations).",
)
@click.option(
    "--graph-cost",
    type=click.FloatRange(min=0),
    default=None,
    help=f"Seconds one Neuron compilation takes on hardware [default: {DEFAULT_GRAPH_COST:g}].",
)
@click.option(
    "--max-shapes",
    type=click.IntRange(min=1),
    default=None,
    help=f"Warn about a location that compiles more shapes than this [default: {DEFAULT_MAX_SHAPES}].",
)
@click.option(
    "--strict/--no-strict",
    default=None,
    help=f"Exit {STRICT_EXIT_CODE} when the script succeeds but a finding of a strict kind occurs "
    "[default: off, or pyproject's strict].",
)
@click.option(
    "--strict-kind",
    "strict_kinds",
    multiple=True,
    type=click.Choice(STRICT_KINDS),
    help="A kind --strict fails on (repeatable; implies --strict) [default: all but int64_on_device].",
)
@click.option(
    "--cpu-fallback-op",
    "fallback_ops",
    multiple=True,
    metavar="aten::NAME",
    help="An operator your torch-neuronx release runs on the CPU (repeatable), added to the table; a composite op "
    "(aten::layer_norm) is reported where it is called; a name torch lacks is an error.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write the report to this file instead of stdout.",
)
@click.option(
    "--also",
    "also",
    multiple=True,
    metavar="FORMAT=PATH",
    help="Also write the report in FORMAT to PATH (repeatable), e.g. --also markdown=report.md.",
)
@click.option(
    "--show-info",
    is_flag=True,
    help="List the findings that need no change (int64 on the device while the values fit in int32); by default "
    "the text report counts them on one line.",
)
@click.option(
    "--cuda-redirect",
    is_flag=True,
    help="Run the unmodified CUDA script with NEURONCOMPAT_CUDA=redirect (docs/cuda_redirect.md) and report each "
    "redirected call site.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def simulate(
    cores: int | None,
    fmt: str,
    graph_cost: float | None,
    max_shapes: int | None,
    strict: bool | None,
    strict_kinds: tuple[str, ...],
    fallback_ops: tuple[str, ...],
    output: str | None,
    also: tuple[str, ...],
    show_info: bool,
    cuda_redirect: bool,
    command: tuple[str, ...],
) -> None:
    # The report and its renderers import the simulator and torch: here, not at start-up (`neuroncompat --help`).
    from neuroncompat import cuda
    from neuroncompat.simulate import github as simulate_github
    from neuroncompat.simulate import launch as simulation
    from neuroncompat.simulate import markdown as simulate_markdown
    from neuroncompat.simulate import redirect_log, report

    cuda.stand_down_in_launcher()
    if cuda_redirect:
        os.environ[cuda.ENV] = cuda.MODE
    renderers = {
        "text": lambda built: report.render_text(built, show_info),
        "json": report.render_json,
        "markdown": simulate_markdown.render,
        "github": simulate_github.render,
    }
    extra: list[tuple[str, Path]] = []
    for spec in also:
        name, _, path = spec.partition("=")
        if name not in renderers or not path:
            expected = f"expected FORMAT=PATH with FORMAT one of {', '.join(renderers)}"
            raise click.BadParameter(f"{spec!r}: {expected}", param_hint="--also")
        extra.append((name, Path(path)))
    try:
        configured = simulate_settings.load(Path.cwd())
    except simulate_settings.SettingsError as exc:
        raise click.UsageError(str(exc)) from exc
    kinds = simulate_settings.strict_kinds(strict, strict_kinds, configured)
    ops = (*configured.cpu_fallback_ops, *fallback_ops)
    if ops:
        _check_fallback_ops(configured, fallback_ops)
    if ops:
        os.environ[FALLBACK_ENV] = ",".join(ops)  # read by the recorder in every simulated process
    cost = next((c for c in (graph_cost, configured.graph_cost) if c is not None), DEFAULT_GRAPH_COST)
    shapes = max_shapes or configured.max_shapes or DEFAULT_MAX_SHAPES
    with tempfile.TemporaryDirectory(prefix="neuroncompat-cuda-log-") as cuda_log:
        if cuda.requested():
            os.environ[cuda.sites.LOG_ENV] = cuda_log
        try:
            exit_code, records = simulation.run(command, cores)
        except simulation.UnsupportedCommand as exc:
            raise click.UsageError(str(exc)) from exc
        built = report.build(records, command, exit_code, cost, shapes, kinds)
        if cuda.requested():
            built["cuda_redirect"] = redirect_log.section(redirect_log.load(cuda_log))
    for name, target in extra:
        target.write_text(renderers[name](built) + "\n")
    text = renderers[fmt](built)
    if output is None:
        click.echo(text)
    else:
        Path(output).write_text(text + "\n")
    raise SystemExit(built["simulate_exit_code"])


@main.command(
    help="Will MODEL's architecture run on Trainium? Builds a tiny random model of the same architecture and, on "
    'the simulated device with the shim, loads it with device_map="neuron", generates greedily with a static '
    "cache and takes a training step eager and compiled, each compared with the CPU. MODEL is a directory with "
    "config.json, a config.json, or a hub id whose config is cached. Exits 1 when a stage fails, 2 when MODEL "
    "cannot be checked (no config, or one transformers cannot read), 130 when interrupted.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="Report format.",
)
@click.option(
    "--tensor-parallel",
    is_flag=True,
    help="Also load MODEL's architecture split over 2 ranks with DistributedConfig(tp_size=2) under torchrun, "
    "generate and take a training step, compared with the CPU (where the config has a tensor-parallel plan).",
)
@click.argument("model")
def check(fmt: str, tensor_parallel: bool, model: str) -> None:
    from neuroncompat import check as preflight
    from neuroncompat.check import progress as check_progress
    from neuroncompat.check import report as check_report

    progress = check_progress.on_terminal([model])
    if progress is not None:
        progress.start()
    try:
        result = preflight.check(model, tensor_parallel=tensor_parallel, progress=progress)
    except preflight.CheckInputError as exc:
        raise InputError(str(exc)) from exc
    except preflight.CheckError as exc:  # a timeout, a worker that died: the check could not finish
        raise Failure(str(exc)) from exc
    finally:
        if progress is not None:
            progress.close()
    click.echo(check_report.RENDERERS[fmt](result))
    raise SystemExit(result["exit_code"])


@main.command(
    help="Will MODEL's step fit in a NeuronCore's memory? Builds MODEL from its config alone (no weights) on fake "
    "tensors, runs one training step (forward, backward, optimizer step) or one generation (prefill and a decode "
    "step on a static cache) under PyTorch's MemTracker, and reports the peak per NeuronCore by category, the phase "
    "it falls in, the largest tensors and a verdict; --tp/--fsdp plan rank 0 of a parallel layout (transformers' own "
    "TP and FSDP2 plans on a fake process group), --layouts searches the layouts of one instance, --lora-r trains "
    "LoRA adapters over a frozen base. MODEL is a directory with config.json, a config.json, or a hub "
    "id whose config is cached. Or give `-- python SCRIPT ARGS...`: the script runs up to its first optimizer "
    "step (or first decode step in generate) with from_pretrained building its model from the config on fake "
    "tensors, and that step is planned (only --instance and --format apply; docs/plan.md says which scripts "
    "work). Exits 0 when it fits, 1 when it does "
    "not, 2 when MODEL, a setting or the script cannot be planned (naming the script's line).",
)
@click.option("--task", type=click.Choice(["train", "generate"]), default="train", show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--seq-len", type=click.IntRange(min=1), default=2048, show_default=True, help="Tokens per sequence.")
@click.option(
    "--dtype", type=click.Choice(["fp32", "bf16"]), default="fp32", show_default=True, help="Parameter dtype."
)
@click.option("--autocast", type=click.Choice(["bf16"]), default=None, help="Run the forward under bf16 autocast.")
@click.option("--optimizer", type=click.Choice(["adamw", "sgd"]), default="adamw", show_default=True)
@click.option("--gradient-checkpointing", is_flag=True, help="Recompute each layer's activations in backward.")
@click.option(
    "--max-new-tokens",
    type=click.IntRange(min=1),
    default=128,
    show_default=True,
    help="generate: the static cache holds --seq-len plus this many positions.",
)
@click.option(
    "--instance",
    type=click.Choice(["trn2", "trn2-lnc1", "trn1"]),
    default="trn2",
    show_default=True,
    help="Whose NeuronCore to compare with: trn2 24 GiB (default LNC=2), trn2-lnc1 12 GiB, trn1 16 GiB.",
)
@click.option(
    "--tp",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Tensor-parallel ranks: the model's own TP plan (transformers' DistributedConfig(tp_size=...)).",
)
@click.option(
    "--fsdp",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="FSDP2 ranks sharding parameters, gradients and optimizer states (DistributedConfig(fsdp_size=...)).",
)
@click.option(
    "--lora-r",
    type=click.IntRange(min=1),
    default=None,
    help="Train LoRA adapters of this rank (real peft) over a frozen base: no gradients or optimizer states for it.",
)
@click.option(
    "--lora-target",
    "lora_targets",
    multiple=True,
    help="--lora-r: a module name the adapters go on (repeat it); peft's default for the model type when none.",
)
@click.option(
    "--layouts",
    "table",
    is_flag=True,
    help="train: trace every TP x FSDP over one instance's cores, by core count, without and with gradient "
    "checkpointing, up to the smallest that fits; plan that one.",
)
@click.option(
    "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="--layouts: trace in this many processes."
)
@click.option(
    "--graphs",
    is_flag=True,
    help="Also count the graphs Neuron would compile for the step under torch.compile(model): Dynamo traces it on "
    "fake inputs with the dry run's neuron backend (one core; a pass of its own, seconds per layer).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.argument("target", nargs=-1, required=True, metavar="MODEL | -- python SCRIPT ARGS...")
@click.pass_context
def plan(
    ctx: click.Context,
    task: str,
    batch_size: int,
    seq_len: int,
    dtype: str,
    autocast: str | None,
    optimizer: str,
    gradient_checkpointing: bool,
    max_new_tokens: int,
    instance: str,
    tp: int,
    fsdp: int,
    lora_r: int | None,
    lora_targets: tuple[str, ...],
    table: bool,
    jobs: int,
    graphs: bool,
    fmt: str,
    target: tuple[str, ...],
) -> None:
    from neuroncompat import plan as planner
    from neuroncompat.plan import report as plan_report

    if len(target) > 1:  # `plan -- python train.py ARGS...`: the script decides the step's settings
        given = [
            name
            for name in ctx.params
            if name not in ("instance", "fmt", "target")
            and ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
        ]
        try:
            if given:
                raise planner.PlanInputError(
                    f"--{given[0].replace('_', '-')}: the script's own step decides it; with `-- python SCRIPT` "
                    "give only --instance and --format"
                )
            result = planner.plan_script(target, instance)
        except planner.PlanInputError as exc:
            raise InputError(str(exc)) from exc
        click.echo(plan_report.RENDERERS[fmt](result))
        raise SystemExit(result["exit_code"])
    model = target[0]
    try:
        settings = planner.PlanSettings(
            task,
            batch_size,
            seq_len,
            dtype,
            autocast,
            optimizer,
            gradient_checkpointing,
            max_new_tokens,
            lora_r,
            lora_targets,
        )
        result = planner.plan(model, settings, instance, planner.Layout(tp, fsdp), table, jobs, graphs)
    except planner.PlanInputError as exc:
        raise InputError(str(exc)) from exc
    click.echo(plan_report.RENDERERS[fmt](result))
    raise SystemExit(result["exit_code"])


if __name__ == "__main__":
    main()
