"""The ``neuroncompat`` command: ``doctor`` and ``run`` (``simulate`` arrives with the dry-run report)."""

from __future__ import annotations

import click

import neuroncompat
from neuroncompat import doctor as doctor_report
from neuroncompat.runner import run as run_script


@click.group(help="Run Hugging Face scripts natively on AWS Trainium (TorchNeuron).")
@click.version_option(neuroncompat.__version__, prog_name="neuroncompat")
def main() -> None:
    pass


@main.command(help="Report Neuron detection, torch-neuronx kind, visible cores, library versions and each patch's state.")
def doctor() -> None:
    for line in doctor_report.report():
        click.echo(line)


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}, help="Run SCRIPT with the shim applied (same as python -m neuroncompat SCRIPT).")
@click.argument("argv", nargs=-1, type=click.UNPROCESSED, required=True)
def run(argv: tuple[str, ...]) -> None:
    run_script(list(argv))
