"""A NeuronCore's memory on each Trainium instance family: what a plan's peak is compared with.

The figures are AWS's (docs/plan.md cites the pages): a Trainium2 chip has 96 GiB of HBM and 8 physical
NeuronCore-v3, grouped by default (``NEURON_LOGICAL_NC_CONFIG=2``) into 4 logical cores of 24 GiB, or 8 of
12 GiB at LNC=1; a Trainium chip (trn1) has 32 GiB and 2 NeuronCore-v2, 16 GiB each. A framework sees one
logical core per process, so the per-core figure is what one rank's tensors must fit in. The layout table spans
the largest instance of each family: a trn2.48xlarge has 16 Trainium2 chips (64 logical cores at LNC=2, 128 at
LNC=1), a trn1.32xlarge 16 Trainium chips (32 cores).
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30


@dataclass(frozen=True)
class Core:
    """One NeuronCore as a process sees it: its memory, and what it is."""

    name: str
    memory_bytes: int
    note: str
    instance: str
    instance_cores: int


CORES = {
    "trn2": Core(
        "trn2", 24 * GIB, "logical NeuronCore at the default LNC=2 (2 physical NeuronCore-v3)", "trn2.48xlarge", 64
    ),
    "trn2-lnc1": Core(
        "trn2-lnc1", 12 * GIB, "physical NeuronCore-v3 at NEURON_LOGICAL_NC_CONFIG=1", "trn2.48xlarge", 128
    ),
    "trn1": Core("trn1", 16 * GIB, "NeuronCore-v2", "trn1.32xlarge", 32),
}
