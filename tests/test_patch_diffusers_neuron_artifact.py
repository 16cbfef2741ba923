"""``diffusers_neuron_artifact``: an Optimum Neuron export folder given to diffusers stops with what it is, the
model it was exported from and the export shapes to pass to every call.

The folder is laid out as optimum-neuron's ``save_pretrained`` writes one (``optimum/neuron/utils/constant.py``:
``model_index.json``, the tokenizer and scheduler, and ``unet/``, ``text_encoder/``, ``vae_encoder/``,
``vae_decoder/`` each with a ``config.json`` carrying a ``"neuron"`` entry of ``static_*`` shapes and a
``model.neuron``), from the tiny SD pipeline's configs.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("diffusers")

BASE = "stabilityai/stable-diffusion-2-1-base"
SHAPES = {"static_batch_size": 1, "static_num_images_per_prompt": 2, "static_height": 48, "static_width": 32}


# the tests share a module fixture that starts fresh processes: one pytest worker runs them all
pytestmark = pytest.mark.xdist_group("neuron_artifact_export")


@pytest.fixture(scope="module")
def export(tiny_sd: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sd_neuron")
    for name in ("model_index.json", "tokenizer", "scheduler"):
        source = tiny_sd / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, folder / name)
    for name, source in (
        ("unet", "unet"),
        ("text_encoder", "text_encoder"),
        ("vae_encoder", "vae"),
        ("vae_decoder", "vae"),
    ):
        config = json.loads((tiny_sd / source / "config.json").read_text())
        config.update(_name_or_path=BASE, neuron={**SHAPES, "auto_cast": "matmul", "auto_cast_type": "bf16"})
        (folder / name).mkdir()
        (folder / name / "config.json").write_text(json.dumps(config))
        (folder / name / "model.neuron").write_bytes(b"NEFF")
    return folder


def _load_pipeline(folder: Path) -> None:
    from diffusers import StableDiffusionPipeline

    StableDiffusionPipeline.from_pretrained(folder)


def test_gap_diffusers_fails_without_saying_why(neuron: object, export: Path) -> None:
    with pytest.raises(Exception) as failure:
        _load_pipeline(export)
    assert "Optimum Neuron export" not in str(failure.value)


def test_a_pipeline_export_names_the_base_model_and_the_shapes(
    shim: ModuleType, export: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from neuroncompat.patches.diffusers_neuron_artifact import NeuronArtifactError

    shim.apply()
    with pytest.raises(OSError) as failure:
        _load_pipeline(export)
    message = str(failure.value)
    assert isinstance(failure.value, NeuronArtifactError)
    assert "an Optimum Neuron export (text_encoder, unet, vae_decoder, vae_encoder)" in message
    assert repr(BASE) in message
    # the tiny VAE halves the image per block: 48x32 latents are 96x64 pixels
    assert "pass height=96, width=64, num_images_per_prompt=2 to every call" in message


def test_a_model_export_subfolder_is_named_too(shim: ModuleType, export: Path) -> None:
    from diffusers import UNet2DConditionModel

    shim.apply()
    with pytest.raises(OSError, match="UNet2DConditionModel.from_pretrained.*an Optimum Neuron export"):
        UNet2DConditionModel.from_pretrained(export, subfolder="unet")


def test_a_diffusers_folder_loads_as_before(shim: ModuleType, tiny_sd: Path, caplog: pytest.LogCaptureFixture) -> None:
    from diffusers import StableDiffusionPipeline

    shim.apply()
    with caplog.at_level(logging.DEBUG, logger="neuroncompat"):
        StableDiffusionPipeline.from_pretrained(tiny_sd)
    assert "[diffusers_neuron_artifact]" not in caplog.text


def test_disabled_by_name(shim: ModuleType, export: Path) -> None:
    shim.apply(skip=["diffusers_neuron_artifact"])
    with pytest.raises(Exception) as failure:
        _load_pipeline(export)
    assert "Optimum Neuron export" not in str(failure.value)
