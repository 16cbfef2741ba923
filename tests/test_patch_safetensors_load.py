"""``safetensors_load``: accelerate's ``load_state`` with several processes loads on_device; safetensors rejects
``neuron:N``, so the patch reads on the CPU and the weights land in the model on its core.

Found resuming accelerate's ``examples/by_feature/checkpointing.py`` with two processes. The two-rank run is
``tests/test_simulator_distributed.py::test_accelerate_save_load_state_and_trainer_resume_restore_weights_exactly``.
"""

from __future__ import annotations

import logging
from types import ModuleType

import pytest
import torch


def test_on_device_load_reads_on_the_cpu_into_the_core(
    shim: ModuleType, tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    from safetensors import SafetensorError
    from safetensors.torch import save_model

    shim.apply()
    from accelerate import checkpointing

    saved = torch.nn.Linear(4, 3)
    save_model(saved, str(tmp_path / "model.safetensors"))
    model = torch.nn.Linear(4, 3).to("neuron:1")
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        checkpointing.load_model(model, str(tmp_path / "model.safetensors"), device="neuron:1")  # as load_state does
    assert model.weight.device == torch.device("neuron:1")
    assert torch.equal(model.weight.detach().cpu(), saved.weight.detach())
    assert "[safetensors_load]" in caplog.text and "neuron:1" in caplog.text
    shim.revert()
    with pytest.raises(SafetensorError, match="device neuron:1 is invalid"):  # the gap itself, as on a trn2
        checkpointing.load_model(model, str(tmp_path / "model.safetensors"), device="neuron:1")
