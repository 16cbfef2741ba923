"""What `neuron-migrate`, `neuroncompat simulate` and `neuroncompat check` share in how they report.

A top-level package of its own, below both `migrate` and `neuroncompat`: `migrate` must not import
`neuroncompat` (its `__init__` starts the runtime shim), and `neuroncompat` must not depend on the codemod.
It imports nothing from either, and nothing heavier than click.
"""
