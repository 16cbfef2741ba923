"""The runtime patches, one module per gap (see each module's docstring for its evidence)."""

from __future__ import annotations

from neuroncompat.patch import Patch
from neuroncompat.patches.async_load import AsyncLoad
from neuroncompat.patches.attention import Attention
from neuroncompat.patches.compile import Compile
from neuroncompat.patches.cross_device_data import CrossDeviceData
from neuroncompat.patches.device_map import DeviceMap
from neuroncompat.patches.diffusers_attention import DiffusersAttention
from neuroncompat.patches.diffusers_complex import DiffusersComplex
from neuroncompat.patches.diffusers_generator import DiffusersGenerator
from neuroncompat.patches.diffusers_group_offload import DiffusersGroupOffload
from neuroncompat.patches.diffusers_neuron_artifact import DiffusersNeuronArtifact
from neuroncompat.patches.diffusers_precision import DiffusersPrecision
from neuroncompat.patches.diffusers_vae_compile import DiffusersVaeCompile
from neuroncompat.patches.diffusers_warmup import DiffusersWarmup
from neuroncompat.patches.dispatch_model import DispatchModel
from neuroncompat.patches.dist_backend import DistBackend
from neuroncompat.patches.dynamic_shapes import DynamicShapes
from neuroncompat.patches.generate_inputs import GenerateInputs
from neuroncompat.patches.kernels import Kernels
from neuroncompat.patches.mem_get_info import MemGetInfo
from neuroncompat.patches.parameter_identity import ParameterIdentity
from neuroncompat.patches.pipeline_device import PipelineDevice
from neuroncompat.patches.precision import Precision
from neuroncompat.patches.quantization import Quantization
from neuroncompat.patches.safetensors_device import SafetensorsDevice
from neuroncompat.patches.static_cache import StaticCache
from neuroncompat.patches.trl_config import TrlConfig
from neuroncompat.patches.unused_device import UnusedDevice
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
    TrlConfig,
    VisibleCores,
    Quantization,
    GenerateInputs,
    Vllm,
    XlaCoinstall,
    SafetensorsDevice,
    Kernels,
    DiffusersGenerator,
    DiffusersAttention,
    DiffusersVaeCompile,
    DiffusersPrecision,
    DiffusersGroupOffload,
    DiffusersWarmup,
    DiffusersComplex,
    DiffusersNeuronArtifact,
    CrossDeviceData,
    ParameterIdentity,
    UnusedDevice,
    MemGetInfo,
)
