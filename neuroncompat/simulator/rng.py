"""Each simulated NeuronCore's random number generator, in the CUDA (Philox) state form.

``torch.neuron.get_rng_state()`` returns what ``torch.cuda.get_rng_state()`` returns: 16 bytes,
a ``uint64`` seed then an ``int64`` offset into the seed's random stream. DTensor's random module
(``torch/distributed/tensor/_random.py``) reads and rewrites exactly that layout for every
accelerator that is not the CPU: before a random op on a sharded tensor it sets each rank's
offset to where that rank's shard starts, so ``reset_parameters()`` after FSDP2's meta-device
init (``to_empty(device="neuron")``) gives every shard different values, and all ranks agree on
the offset afterwards. A Mersenne-Twister state (what the CPU generator has) makes it fail.

The state layout (8-byte seed, then 8-byte offset) and an unseeded generator starting from a
nondeterministic seed are TorchNeuron's documented behaviour (AWS Neuron docs, "Random number
generation"). How its on-device kernel turns (seed, offset) into values, and by how much an op
advances the offset, is not public (docs/simulator.md); there the simulator follows CUDA's
contract, not its bits:

- ``manual_seed(s)`` sets the seed and offset 0; the same (seed, offset) gives the same draws.
- a random op draws from a CPU generator seeded by mixing (seed, offset), then advances the
  offset by the number of values drawn, rounded up to a multiple of 4 (CUDA's Philox draws 4
  values per call and DTensor aligns its offsets to 4).

So values differ from CUDA's and from the CPU generator's for the same seed, as they do between
CUDA and CPU.
"""

from __future__ import annotations

import os
import struct

import torch

STATE_BYTES = 16
_MASK64 = (1 << 64) - 1


def _mix(seed: int, offset: int) -> int:
    """splitmix64 of (seed, offset): nearby offsets give unrelated CPU generator seeds."""
    z = (seed ^ (offset * 0x9E3779B97F4A7C15)) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


class CoreGenerator:
    """The (seed, offset) generator of one simulated core."""

    __slots__ = ("seed", "offset")

    def __init__(self) -> None:
        self.seed = 0
        self.offset = 0
        self.random_seed()  # TorchNeuron: an unseeded generator starts from a nondeterministic seed

    def manual_seed(self, seed: int) -> None:
        self.seed = int(seed) & _MASK64
        self.offset = 0

    def random_seed(self) -> None:
        """A nondeterministic seed, as ``torch.neuron.seed()``."""
        self.manual_seed(int.from_bytes(os.urandom(8), "little"))

    def initial_seed(self) -> int:
        return self.seed

    def get_state(self) -> torch.Tensor:
        """16 bytes on the CPU: seed (``uint64``) then offset (``int64``), little-endian as CUDA."""
        packed = struct.pack("<Qq", self.seed, self.offset)
        return torch.frombuffer(bytearray(packed), dtype=torch.uint8)

    def set_state(self, new_state: torch.Tensor) -> None:
        if new_state.dtype != torch.uint8 or new_state.numel() != STATE_BYTES:
            raise RuntimeError(
                f"a neuron RNG state is {STATE_BYTES} bytes (torch.uint8: seed then offset, as CUDA's), "
                f"got {new_state.numel()} element(s) of {new_state.dtype}"
            )
        self.seed, self.offset = struct.unpack("<Qq", bytes(new_state.cpu().contiguous().tolist()))

    def cpu_generator(self) -> torch.Generator:
        """A CPU generator for the next draw, at the current (seed, offset)."""
        return cpu_generator_at(self.seed, self.offset)

    def advance(self, values: int) -> None:
        """Move past ``values`` drawn values (rounded up to 4, a Philox call's width)."""
        self.offset = advanced(self.offset, values)


def cpu_generator_at(seed: int, offset: int) -> torch.Generator:
    """The CPU generator that draws the values at (seed, offset) of a neuron random stream.

    Shared by each core's default generator and by ``torch.Generator(device="neuron")`` objects
    (whose seed and offset the C++ ``native/neuron_device.cpp`` keeps), so the same (seed, offset)
    gives the same values from either.
    """
    return torch.Generator().manual_seed(_mix(seed, offset))


def advanced(offset: int, values: int) -> int:
    """The offset after drawing ``values`` values from ``offset`` (rounded up to 4, a Philox call's width)."""
    return offset + (values + 3) // 4 * 4
