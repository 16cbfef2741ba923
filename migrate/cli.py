"""`neuron-migrate`: the command line (click).

Exit codes: 0 nothing to do (or everything written); 1 with `--check` when any file would
change (new rewrites or new TODOs); 2 on errors (unparseable or unreadable files, internal
errors, bad options) and when a file named on the command line (not found in a directory) was
skipped because it cannot be migrated: binary, undecodable, or not a kind neuron-migrate knows;
and with `--write` when a file changed on disk during the run and was therefore not written
(`skipped: PATH: changed during the run, not written`; run again to migrate it). A file nested
deeper than Python's parser accepts is an error naming its line, and so is a file whose worker
process died; the other files are migrated all the same. An error in the options or the config is written
in the chosen format too (`--format json`: an object with an `error` field). 130 when interrupted (Ctrl-C),
never 1: an interrupted `--check` has not found a change (`neuroncompat_report.exits`).
With the default text format diffs go to stdout (coloured only on a
terminal, never with NO_COLOR set) and the summary to stderr; the other formats
(`migrate.formats`) write their report to stdout and, for `github`, the summary to stderr.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import click

from migrate import config as config_mod
from migrate.discover import source_files
from migrate.formats import FORMATS
from migrate.options import Options
from migrate.progress import on_terminal
from migrate.registry import Selection
from migrate.rule_families import all_rules, get_rule
from neuroncompat_report.exits import FAILED, INPUT_ERROR, Command, InputError


class _Command(Command):
    tool = "neuron-migrate"


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v.strip().upper() for value in values for v in value.split(",") if v.strip())


EPILOG = """\b
Examples:
  neuron-migrate train.py              show the diff for one script
  neuron-migrate --write src/          migrate a tree in place
  neuron-migrate --check .             in CI or pre-commit: exit 1 while anything needs migrating
  neuron-migrate - < train.py          a script on stdin, the migrated script on stdout

\b
Exit codes: 0 nothing to change (or all written), 1 changes needed (--check),
2 usage or input error, 130 interrupted.
"""


@click.command(cls=_Command, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
# the version is looked up in the package metadata only when asked for (the CLI's start-up stays light)
@click.version_option(
    None, "--version", "-V", package_name="neuroncompat", prog_name="neuron-migrate", message="%(prog)s %(version)s"
)
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option("--write", is_flag=True, help="Apply the changes in place.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when any file would change.")
@click.option("--select", multiple=True, help="Only these rule ids or prefixes (comma-separated, repeatable).")
@click.option("--ignore", multiple=True, help="Skip these rule ids or prefixes.")
@click.option("--exclude", multiple=True, help="Extra directory names to skip when recursing.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: CPUs).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Report format: text (diff + summary), json, markdown (PR comment), github (annotations), sarif.",
)
@click.option(
    "--safe-only",
    is_flag=True,
    help="Only the rewrites that keep what the script does (safe fixes): land them first, then run without it "
    "and review the unsafe rest (marked in every report).",
)
@click.option("--no-shim", is_flag=True, help="Do not add `import neuroncompat` to entry scripts.")
@click.option(
    "--neuron-kernel",
    "neuron_kernels",
    multiple=True,
    metavar="LAYER=ORG/REPO:CLASS",
    help='Add a "neuron" entry for LAYER to KernelConfig mappings (NM212), e.g. RMSNorm=org/rmsnorm-nki:RMSNorm; '
    "repeatable, added to [tool.neuron-migrate] neuron-kernels.",
)
@click.option("--quiet", "-q", is_flag=True, help="No diff and no summary; only errors.")
@click.option(
    "--explain",
    metavar="NMxxx",
    help="Describe one rule (id, name, fix safety, where it is declared and applied, its doc) and exit.",
)
@click.option("--rules-doc", is_flag=True, help="Print docs/rules.md (generated from the registry) and exit.")
def main(
    paths: tuple[str, ...],
    write: bool,
    check: bool,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    exclude: tuple[str, ...],
    jobs: int | None,
    fmt: str | None,
    safe_only: bool,
    no_shim: bool,
    neuron_kernels: tuple[str, ...],
    quiet: bool,
    explain: str | None,
    rules_doc: bool,
) -> None:
    """Port CUDA Hugging Face scripts under PATHS to native TorchNeuron.

    PATHS are Python files, notebooks (.ipynb), accelerate/recipe YAML configs and shell
    launchers, or directories holding them; `-` is a Python script on stdin. Shows a unified
    diff by default; --write applies it; --check is for CI and pre-commit.
    """
    if explain:
        from migrate.docs import explain as render
        from migrate.docs import safety_text
        from migrate.rule_sources import hooks, places

        rule = get_rule(explain)
        if rule is None:
            raise InputError(f"unknown rule {explain!r}")
        declared, used = places(rule.id)
        click.echo(f"{rule.id} {rule.name}\nfix safety: {safety_text(rule)}")
        click.echo(f"declared at: {', '.join(declared) or '-'}\napplied at: {', '.join(used) or '-'}")
        click.echo(f"hooks: {', '.join(hooks(rule.id)) or '-'}\n")
        click.echo(render(rule), nl=False)
        return
    if rules_doc:
        from migrate.docs import rules_markdown

        click.echo(rules_markdown(), nl=False)
        return
    if not paths:
        raise InputError("give at least one file or directory (see --help)")
    if write and check:
        raise InputError("--write and --check are exclusive")
    try:
        cfg = config_mod.load(Path(paths[0])).values
    except config_mod.ConfigError as exc:
        raise InputError(str(exc)) from exc

    from migrate import runner
    from migrate.formats import text

    selection = Selection(
        select=_split(select) or _split(tuple(cfg.get("select", ()))),
        ignore=(_split(ignore) or _split(tuple(cfg.get("ignore", ()))))
        + (tuple(rule.id for rule in all_rules() if rule.safety == "unsafe") if safe_only else ()),
    )
    kernels = dict(cfg.get("neuron-kernels", {}))
    for entry in neuron_kernels:
        layer, _, repo = entry.partition("=")
        problem = config_mod.kernel_repo_problem(repo) if layer.strip() else "expected LAYER=org/repo:Class"
        if problem:
            raise InputError(f"--neuron-kernel {entry}: {problem}", fmt or cfg.get("format"))
        kernels[layer.strip()] = repo.strip()
    options = Options(
        selection=selection, shim=not no_shim and cfg.get("shim", True), neuron_kernels=tuple(sorted(kernels.items()))
    )
    if "-" in paths:
        if len(paths) > 1 or write or fmt not in (None, "text"):
            click.echo("neuron-migrate: `-` (stdin) goes alone, without --write or --format", err=True)
            sys.exit(2)
        from migrate import stdin

        sys.exit(stdin.run(options, check))
    fmt = fmt or cfg.get("format", "text")
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r} in pyproject.toml (one of {', '.join(FORMATS)})")
    files = list(source_files(list(paths), frozenset(exclude) | frozenset(cfg.get("exclude", ()))))
    jobs = jobs or cfg.get("jobs") or (runner.default_jobs() if len(files) > 8 else 1)
    progress = on_terminal(len(files), quiet)
    results = runner.run(files, options, jobs=jobs, write=write, progress=progress)
    if progress is not None:
        progress.close()
    mode = "write" if write else "check" if check else "diff"

    if fmt != "text":
        module = importlib.import_module(f"migrate.formats.{fmt}")  # only the chosen one: json's costs a start-up
        click.echo(module.render(results, mode), nl=False)
    elif not quiet and mode == "diff":
        click.echo(text.diffs(results), nl=False, color=False if os.environ.get("NO_COLOR") else None)
    if not quiet and fmt in ("text", "github"):
        click.echo(text.render(results, mode), err=True, nl=False)
    elif quiet:
        for result in results:
            if result.error:
                click.echo(f"error: {result.error}", err=True)

    named = {str(Path(p)) for p in paths if not Path(p).is_dir()}
    if any(
        r.status in ("error", "internal-error")
        or (r.skip_reason and (r.path in named or r.skip_reason == runner.NOT_WRITTEN))
        for r in results
    ):
        sys.exit(INPUT_ERROR)
    if check and any(r.status == "changed" for r in results):
        sys.exit(FAILED)
