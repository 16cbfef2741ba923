"""The runtime patches, one module per gap (see each module's docstring for its evidence)."""

from __future__ import annotations

from neuroncompat.patch import Patch
from neuroncompat.patches.async_load import AsyncLoad
from neuroncompat.patches.attention import Attention
from neuroncompat.patches.compile import Compile
from neuroncompat.patches.device_map import DeviceMap
from neuroncompat.patches.dispatch_model import DispatchModel
from neuroncompat.patches.dist_backend import DistBackend
from neuroncompat.patches.dynamic_shapes import DynamicShapes
from neuroncompat.patches.generate_inputs import GenerateInputs
from neuroncompat.patches.pipeline_device import PipelineDevice
from neuroncompat.patches.precision import Precision
from neuroncompat.patches.quantization import Quantization
from neuroncompat.patches.safetensors_load import SafetensorsLoad
from neuroncompat.patches.static_cache import StaticCache
from neuroncompat.patches.trl_config import TrlConfig
from neuroncompat.patches.visible_cores import VisibleCores
from neuroncompat.patches.vllm import Vllm
from neuroncompat.patches.xla_coinstall import XlaCoinstall

PATCH_TYPES: tuple[type[Patch], ...] = (
    DeviceMap,
    AsyncLoad,
    StaticCache,
    DynamicShapes,
    Compile,
    PipelineDevice,
    Precision,
    Attention,
    DistBackend,
    DispatchModel,
    SafetensorsLoad,
    TrlConfig,
    VisibleCores,
    Quantization,
    GenerateInputs,
    Vllm,
    XlaCoinstall,
)
