"""`python -m migrate` and the `neuron-migrate` console script: the CLI in a process of its own."""

import gc


def main() -> None:
    """Run the CLI with its start-up's objects out of the garbage collector's way.

    Importing click, libcst and the codemod leaves a few hundred thousand long-lived objects (classes, functions,
    compiled patterns) that every full collection during the run would walk again while libcst builds and rebuilds
    trees (issue 39: on one script, about a tenth of the CPU the codemod adds to libcst's own start-up).
    `gc.freeze()` moves them to the permanent generation, as a pre-forking server does, so collections walk only what
    the run allocates. Only the process the command starts does this: a program that calls `migrate.cli.main`
    itself (the tests, through click's runner) keeps its collector as it was.
    """
    from migrate.cli import main as cli

    gc.freeze()
    cli()


if __name__ == "__main__":
    main()
