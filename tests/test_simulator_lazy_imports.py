"""The simulated device starts without importing Dynamo, and its compile backend and kernels still arrive in time.

Every process of a dry run or a test imports torch with the simulator on (``NEURONCOMPAT_SIMULATE=1``); importing
``torch._dynamo`` at that moment cost each one about 1.5 s of CPU (the ``neuron`` backend registration, and the
varlen and flex attention modules, which import Dynamo themselves). Each registration now waits for the module
it needs (the shim's start loads the dry run's recorder, which imports Dynamo, only under ``neuroncompat
simulate``): ``torch.compile`` imports Dynamo before it looks a backend up, and the varlen / flex attention functions
live in the modules whose import fires the hook. ``neuroncompat.revert()`` must not cancel them: they belong to
the device, not to the shim's patches.
"""

from __future__ import annotations

from helpers import run_python


def test_the_device_starts_without_dynamo_and_compiles_after_a_revert() -> None:
    result = run_python(
        """
        import sys
        import torch
        x = torch.ones(2, device="neuron")
        print("dynamo after start:", "torch._dynamo" in sys.modules)
        import neuroncompat  # the shim starts on the device: no recorder without `neuroncompat simulate`
        print("dynamo after the shim:", "torch._dynamo" in sys.modules)
        neuroncompat.revert()  # the shim's pending hooks go; the device's stay
        from neuroncompat import simulator
        doubled = torch.compile(lambda t: t * 2, backend="neuron")(x)
        print("compiled:", doubled.tolist(), doubled.device, len(simulator.compiles()))
        from torch.nn.attention.flex_attention import flex_attention
        q = torch.randn(1, 1, 4, 8, device="neuron")
        print("flex:", flex_attention(q, q, q).device)
        """,
        env={"NEURONCOMPAT_SIMULATE": "1", "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [
        "dynamo after start: False",
        "dynamo after the shim: False",
        "compiled: [2.0, 2.0] neuron:0 1",
        "flex: neuron:0",
    ], result.stdout
