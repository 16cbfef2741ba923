"""Rule families, one module each. Importing this package registers every rule and hook.

Hook order is import order: families whose rewrites others build on come first (device
literals before the generic settings hooks see them, precision before drift), and the
TODO family last so it sees the final call shapes.
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
    todo,
)
