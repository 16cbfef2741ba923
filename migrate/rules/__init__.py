"""Rule families, one module each. Importing this package registers every rule and hook.

Hook order is import order: families whose rewrites others build on come first (device
literals before the generic settings hooks see them, precision before drift), the legacy
Neuron families (Optimum Neuron, torch_xla) after them so the generic rewrites have already
renamed `torch_dtype` or `tokenizer=` in the calls they move, and the TODO family last so it
sees the final call shapes.
"""

from migrate.rules import (  # noqa: F401
    device,
    cuda_api,
    precision,
    attention,
    quantization,
    generate,
    static_shapes,
    distributed,
    drift,
    optimum_training,
    optimum_inference,
    xla,
    todo,
)
