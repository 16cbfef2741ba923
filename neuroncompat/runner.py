"""Run a script or module as ``__main__`` with the shim applied (``python -m neuroncompat``).

``python -m neuroncompat train.py --lr 1e-4`` behaves like ``python train.py --lr 1e-4``:
``sys.argv``, ``sys.path[0]``, ``__main__``, exit codes and exceptions are the script's own. The
package import has already applied the shim, so the script needs no edit; this is also what
``torchrun --nproc_per_node=N -m neuroncompat train.py`` runs in every rank.
"""

from __future__ import annotations

import os
import runpy
import sys

USAGE = """usage: python -m neuroncompat SCRIPT.py [ARGS...]
       python -m neuroncompat -m MODULE [ARGS...]

Runs SCRIPT (or MODULE) with neuroncompat's runtime patches applied.
Also: `neuroncompat doctor` reports what applies on this machine."""


def run(argv: list[str]) -> None:
    """Execute ``argv[0]`` (a path, or ``-m module``) as ``__main__`` with ``argv`` as its argv."""
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        raise SystemExit(0 if argv else 2)
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            raise SystemExit(2)
        sys.argv = argv[1:]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    script = argv[0]
    if not os.path.exists(script):
        print(f"neuroncompat: can't open file {script!r}: No such file or directory", file=sys.stderr)
        raise SystemExit(2)
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
