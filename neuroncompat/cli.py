"""The ``neuroncompat`` command: ``doctor``, ``run`` and ``simulate`` (the dry run that counts Neuron compilations)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

import neuroncompat
from neuroncompat import doctor as doctor_report
from neuroncompat.runner import run as run_script
from neuroncompat.simulate import launch as simulation
from neuroncompat.simulate import report
from neuroncompat.simulate import redirect_log
from neuroncompat.simulate.report import DEFAULT_GRAPH_COST, DEFAULT_MAX_SHAPES


@click.group(help="Run Hugging Face scripts natively on AWS Trainium (TorchNeuron).")
@click.version_option(neuroncompat.__version__, prog_name="neuroncompat")
def main() -> None:
    pass


@main.command(help="Report Neuron detection, torch-neuronx kind, visible cores, library versions and each patch's state.")
def doctor() -> None:
    from neuroncompat import cuda

    cuda.stand_down_in_launcher()
    for line in doctor_report.report():
        click.echo(line)


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}, help="Run SCRIPT with the shim applied (same as python -m neuroncompat SCRIPT).")
@click.argument("argv", nargs=-1, type=click.UNPROCESSED, required=True)
def run(argv: tuple[str, ...]) -> None:
    run_script(list(argv))


@main.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    help=(
        "Dry-run COMMAND (python|torchrun|accelerate launch SCRIPT ARGS...) on the simulated Neuron device with the "
        "shim, then report per rank the graphs Neuron would compile, where each recompile came from, the compile "
        "time they would cost on hardware, and the fix for a location that compiles many shapes. Exits with the "
        "script's exit code; the report is printed even when the script fails."
    ),
)
@click.option("--cores", type=click.IntRange(min=1), default=None, help="Simulated NeuronCores [default: 2, or one per local process].")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Report format.")
@click.option("--graph-cost", type=click.FloatRange(min=0), default=DEFAULT_GRAPH_COST, show_default=True, help="Seconds one Neuron compilation takes on hardware.")
@click.option("--max-shapes", type=click.IntRange(min=1), default=DEFAULT_MAX_SHAPES, show_default=True, help="Warn about a location that compiles more shapes than this.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None, help="Write the report to this file instead of stdout.")
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
    graph_cost: float,
    max_shapes: int,
    output: str | None,
    cuda_redirect: bool,
    command: tuple[str, ...],
) -> None:
    from neuroncompat import cuda

    cuda.stand_down_in_launcher()
    if cuda_redirect:
        os.environ[cuda.ENV] = cuda.MODE
    with tempfile.TemporaryDirectory(prefix="neuroncompat-cuda-log-") as cuda_log:
        if cuda.requested():
            os.environ[cuda.sites.LOG_ENV] = cuda_log
        try:
            exit_code, records = simulation.run(command, cores)
        except simulation.UnsupportedCommand as exc:
            raise click.UsageError(str(exc)) from exc
        built = report.build(records, command, exit_code, graph_cost, max_shapes)
        if cuda.requested():
            built["cuda_redirect"] = redirect_log.section(redirect_log.load(cuda_log))
    text = report.render_json(built) if fmt == "json" else report.render_text(built)
    if "cuda_redirect" in built and fmt == "text":
        text += "\n" + redirect_log.render_text(built["cuda_redirect"])
    if output is None:
        click.echo(text)
    else:
        Path(output).write_text(text + "\n")
    raise SystemExit(exit_code)


if __name__ == "__main__":
    main()
