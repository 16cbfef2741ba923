"""The plan's peak against the simulated device's (issue 42, "Accuracy"): the same step
(``neuroncompat.plan.step``) traced on fake tensors and run for real, within 5% at the end of every phase.

The simulated core's allocator counts what hardware's ``max_memory_allocated`` would: every tensor's block
(rounded to 512 bytes) and the CPU kernels' own temporaries. Checked per phase, not only at the step's peak,
because AdamW's optimizer step is the peak of a small model and would hide an error in the activations.
The issue's 12-layer hidden-512 figure is in bench/bench_plan.py, too slow for a test.
"""

from __future__ import annotations

import pytest
import torch

from neuroncompat.plan.settings import PlanSettings

# reads the simulated cores' memory statistics (scripts/determinism.sh repeats these)
pytestmark = pytest.mark.device_stats

TOLERANCE = 0.05
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 256}  # fmt: skip
SMALL = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 1000}  # fmt: skip


def _errors(shape: dict[str, int], settings: PlanSettings, core: int) -> dict[str, float]:
    """Each phase's relative error of the planned peak against the measured one."""
    from transformers import LlamaConfig

    from neuroncompat.plan.measure import measure
    from neuroncompat.plan.trace import trace

    config = LlamaConfig(**shape)
    planned = trace(config, settings).phase_peaks
    measured = measure(config, settings, core)
    return {phase: abs(planned[phase] - measured[phase]) / measured[phase] for phase in measured}


def test_the_tiny_model_plan_is_within_5_percent_in_every_phase(own_core: int) -> None:
    errors = _errors(TINY, PlanSettings(batch_size=2, seq_len=32), own_core)
    assert max(errors.values()) <= TOLERANCE, errors


# The tiny model's bf16 checkpointed backward is measured above the plan, and MemTracker run over the same step on
# real device tensors gives the plan's figure to the byte: the gap is the CPU kernels' own scratch memory (bf16 SDPA
# and matmul backward, not tensors the dispatcher sees), which the simulator takes from the core and the plan does
# not model (docs/plan.md). It grows with the intra-op threads: 3.2% with one (the suite's, tests/conftest.py),
# 7.0% with two. At 4 layers of hidden 256 it is 0.3%, at 12 of hidden 512 0.0%.
CPU_SCRATCH = pytest.mark.xfail(
    torch.get_num_threads() > 1, strict=True, reason="with several threads the CPU kernels' scratch is over 5%"
)


@pytest.mark.slow  # eight real training steps on the simulated device
@pytest.mark.parametrize(
    ("shape", "autocast", "checkpointing"),
    [
        pytest.param(TINY, None, False, id="tiny-fp32"),
        pytest.param(TINY, None, True, id="tiny-fp32-checkpointed"),
        pytest.param(TINY, "bf16", False, id="tiny-bf16-autocast"),
        pytest.param(TINY, "bf16", True, id="tiny-bf16-autocast-checkpointed", marks=CPU_SCRATCH),
        pytest.param(SMALL, None, False, id="4-layer-h256-fp32"),
        pytest.param(SMALL, None, True, id="4-layer-h256-fp32-checkpointed"),
        pytest.param(SMALL, "bf16", False, id="4-layer-h256-bf16-autocast"),
        pytest.param(SMALL, "bf16", True, id="4-layer-h256-bf16-autocast-checkpointed"),
    ],
)
def test_the_plan_is_within_5_percent_of_the_measured_peak(
    shape: dict[str, int], autocast: str | None, checkpointing: bool, own_core: int
) -> None:
    settings = PlanSettings(batch_size=2, seq_len=128, autocast=autocast, gradient_checkpointing=checkpointing)
    errors = _errors(shape, settings, own_core)
    assert max(errors.values()) <= TOLERANCE, errors
