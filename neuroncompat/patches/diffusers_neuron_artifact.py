"""``diffusers_neuron_artifact``: loading an Optimum Neuron export folder says what it is and what to load instead.

Gap (docs/gaps.md#diffusers_neuron_artifact): ``optimum-neuron`` compiles a diffusion pipeline ahead of time and
``save_pretrained`` writes a folder of compiled NEFFs: ``model_index.json`` and one subfolder per component
(``unet/``, ``transformer/``, ``text_encoder/``, ``vae_decoder/``, ...), each with a ``model.neuron`` and a
``config.json`` whose ``"neuron"`` entry holds the export shapes (``static_batch_size``, ``static_height``,
``static_width``, ``static_num_images_per_prompt``, ``static_sequence_length``; optimum-neuron
``optimum/neuron/utils/constant.py:17-28``, ``utils/argument_utils.py:247-330``). diffusers cannot read those
files: ``DiffusionPipeline.from_pretrained(folder)`` or ``UNet2DConditionModel.from_pretrained(folder,
subfolder="unet")`` fail deep in the loader on missing weights, with nothing that says the folder is a
Neuron export, which model it came from, or that its fixed shapes must now be passed to every call
(Optimum's ``__call__`` overwrote the caller's height/width with them, ``optimum/neuron/modeling_diffusion.py``).

Fix: before diffusers' ``from_pretrained`` reads a local folder, look for compiled components (a
``model.neuron`` and no diffusers or transformers weights beside it) and stop with an error (an ``OSError``, as
diffusers' own for missing weights) naming the folder, the base model recorded in the export's configs
(``_name_or_path``, where present) and the export shapes in pixels, with the native code to run instead.
Folders with weights, hub ids and everything else load as before. Stands down when diffusers' loader itself
knows ``model.neuron``.

Example::

    pipe = StableDiffusionPipeline.from_pretrained("sd_neuron/")   # exported by optimum-cli export neuron
    # before: OSError: Error no file named model.safetensors, or pytorch_model.bin, found in directory
    #         sd_neuron/text_encoder.
    # after:  NeuronArtifactError (an OSError): neuroncompat [diffusers_neuron_artifact]:
    #         StableDiffusionPipeline.from_pretrained('sd_neuron'): this is an Optimum Neuron export (text_encoder,
    #         unet, vae_decoder, vae_encoder), compiled NEFFs (model.neuron) that diffusers cannot load. On
    #         TorchNeuron load the model it was exported from, 'stabilityai/stable-diffusion-2-1-base', ...
    #         pass height=512, width=512, num_images_per_prompt=1 to every call
"""

from __future__ import annotations

import functools
import inspect
import json
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch, PatchError

COMPILED = "model.neuron"
# Weight files diffusers (models) and transformers (text encoders) load.
_WEIGHTS = ("diffusion_pytorch_model", "model.safetensors", "pytorch_model")
_SHAPES = (
    "static_batch_size",
    "static_num_images_per_prompt",
    "static_height",
    "static_width",
    "static_sequence_length",
)


class NeuronArtifactError(PatchError, OSError):
    """An Optimum Neuron export folder given to diffusers (an ``OSError``, as diffusers' own loading errors)."""


class DiffusersNeuronArtifact(Patch):
    id = "diffusers_neuron_artifact"
    reason = "an Optimum Neuron export folder (model.neuron files) fails deep in diffusers' loader: say what it is"
    targets = ("diffusers.pipelines.pipeline_utils", "diffusers.models.modeling_utils")
    error = NeuronArtifactError

    def patch_module(self, name: str, module: ModuleType) -> bool:
        cls = module.DiffusionPipeline if name == "diffusers.pipelines.pipeline_utils" else module.ModelMixin
        original = cls.__dict__["from_pretrained"].__func__
        if COMPILED in inspect.getsource(original):
            return False
        pipeline = cls is getattr(module, "DiffusionPipeline", None)
        self.replace(cls, "from_pretrained", classmethod(self._wrap(original, pipeline)))
        return True

    def _wrap(self, original: Callable[..., Any], pipeline: bool) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def from_pretrained(cls: type, *args: Any, **kwargs: Any) -> Any:
            path = args[0] if args else kwargs.get("pretrained_model_name_or_path")
            if isinstance(path, (str, os.PathLike)) and os.path.isdir(path):
                folder = Path(path)
                subfolder = kwargs.get("subfolder")
                compiled = _compiled_components(folder) if pipeline else _compiled_model(folder, subfolder)
                if compiled:
                    patch.fail(_message(cls.__name__, folder, compiled))
            return original(cls, *args, **kwargs)

        return from_pretrained


def _has_weights(directory: Path) -> bool:
    return any(entry.name.startswith(_WEIGHTS) for entry in directory.iterdir() if entry.is_file())


def _compiled_at(directory: Path) -> bool:
    return (directory / COMPILED).is_file() and not _has_weights(directory)


def _compiled_components(folder: Path) -> list[str]:
    """The component subfolders of a pipeline folder that hold only compiled NEFFs."""
    return sorted(entry.name for entry in folder.iterdir() if entry.is_dir() and _compiled_at(entry))


def _compiled_model(folder: Path, subfolder: str | None) -> list[str]:
    directory = folder / subfolder if subfolder else folder
    return [subfolder or "."] if directory.is_dir() and _compiled_at(directory) else []


def _config(directory: Path) -> dict[str, Any]:
    try:
        loaded = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _vae_scale_factor(folder: Path) -> int:
    """diffusers' ``2 ** (len(vae.config.block_out_channels) - 1)``, from the exported VAE decoder (8 without)."""
    for name in ("vae_decoder", "vae"):
        channels = _config(folder / name).get("block_out_channels")
        if isinstance(channels, list) and channels:
            return int(2 ** (len(channels) - 1))
    return 8


def _message(owner: str, folder: Path, compiled: list[str]) -> str:
    root = folder if compiled != ["."] else folder.parent
    configs = [_config(folder / name if name != "." else folder) for name in compiled]
    base = next((c["_name_or_path"] for c in configs if isinstance(c.get("_name_or_path"), str)), None)
    shapes: dict[str, Any] = {}
    for config in configs:
        neuron = config.get("neuron")
        if isinstance(neuron, dict):
            shapes.update({key: neuron[key] for key in _SHAPES if key in neuron and key not in shapes})
    scale = _vae_scale_factor(root)
    call = []
    if "static_height" in shapes and "static_width" in shapes:
        call += [f"height={shapes['static_height'] * scale}", f"width={shapes['static_width'] * scale}"]
    if "static_num_images_per_prompt" in shapes:
        call.append(f"num_images_per_prompt={shapes['static_num_images_per_prompt']}")
    if "static_sequence_length" in shapes:
        call.append(f"max_sequence_length={shapes['static_sequence_length']}")
    where = "" if compiled == ["."] else f" ({', '.join(compiled)})"
    source = f"{base!r}" if base else "the model id given to its export (its configs do not record it)"
    text = (
        f"{owner}.from_pretrained({str(folder)!r}): this is an Optimum Neuron export{where}, compiled NEFFs "
        f"(model.neuron) that diffusers cannot load. On TorchNeuron load the model it was exported from, "
        f"{source}, move it with .to('neuron') and compile on the device (torch.compile(..., backend='neuron', "
        "fullgraph=True, dynamic=False); neuron-migrate rewrites Optimum's pipelines so)"
    )
    if shapes:
        exported = ", ".join(f"{key.removeprefix('static_')} {value}" for key, value in shapes.items())
        text += f". Exported for {exported} (height/width in latents x {scale})"
    if call:
        text += f"; Optimum's call used those shapes whatever it was given: pass {', '.join(call)} to every call"
    return text
