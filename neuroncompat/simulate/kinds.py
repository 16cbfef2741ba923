"""What ``neuroncompat simulate`` reports and fails on, and its defaults: names only, no torch.

The command line builds its options from these (``--strict-kind`` choices, the defaults in ``--help``) when
``neuroncompat`` starts; the report module that uses them imports the simulator and torch, which ``neuroncompat
--help`` or ``neuroncompat doctor`` must not wait for (about 2 CPU-s on a 2-core machine).
"""

from __future__ import annotations

from neuroncompat.simulate import dtype_findings

# Kinds of finding, in report order.
FINDING_KINDS = ("graph_break", "data_dependent", "cpu_fallback", *dtype_findings.KINDS)
# What --strict can fail on: a graph Neuron rejects, a location past --max-shapes, the findings, and a
# diffusers pipeline call that compiled after its first denoising step.
STRICT_KINDS = ("rejected", "shape_churn", *FINDING_KINDS, "step_recompile")
# What --strict (strict = true) fails on when no kind is named: all but the informational int64 kind.
STRICT_DEFAULT = tuple(kind for kind in STRICT_KINDS if kind not in dtype_findings.NOT_STRICT_BY_DEFAULT)
# neuroncompat simulate's exit status when --strict finds something and the script succeeded.
STRICT_EXIT_CODE = 4
DEFAULT_GRAPH_COST = 60.0
DEFAULT_MAX_SHAPES = 4
# Extra CPU_FALLBACK operators, comma-separated: set by ``neuroncompat simulate`` from --cpu-fallback-op and
# pyproject, read by the recorder in every simulated process (neuroncompat.simulate.op_findings).
FALLBACK_ENV = "NEURONCOMPAT_SIMULATE_CPU_FALLBACK_OPS"
