"""The settings a run passes to every file kind's migrator, apart from the pipeline that reads them.

The config-file migrators take them too, so they live below `migrate.engine`: a migrator that only needs
the rule selection must not import the libcst pipeline to get it.
"""

from __future__ import annotations

from dataclasses import dataclass

from migrate.registry import Selection


@dataclass(frozen=True)
class Options:
    """Settings that change what the engine produces."""

    selection: Selection = Selection()
    shim: bool = True
    # (layer name, Neuron kernel repo "org/repo:Layer") pairs NM212 adds to `KernelConfig` mappings
    neuron_kernels: tuple[tuple[str, str], ...] = ()
    # False parses every file, as if the byte-level prefilter let all through: the output must be the same
    # (it only skips files no rule would change), which tests/migrate/test_prefilter.py checks this way
    prefilter: bool = True
