"""Prints what an accelerate-launched rank sees: its rank, the world size and its device.

Modelled on the public accelerate/TRL examples, which are launched with a bare
``accelerate launch --num_processes 2 train.py`` (no config file, no ``--multi_gpu``) and leave the
process count to the launcher. On a Trainium host the launcher sees the NeuronCores and starts one
process per requested core.
"""

import os

from accelerate import Accelerator

accelerator = Accelerator()
line = f"WORLD rank={accelerator.process_index} size={accelerator.num_processes} device={accelerator.device}\n"
os.write(1, line.encode())  # one write: both ranks share the launcher's stdout
