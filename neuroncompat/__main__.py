"""``python -m neuroncompat SCRIPT.py ARGS...``: run a script with the shim applied."""

import sys

from neuroncompat.runner import run

if __name__ == "__main__":
    run(sys.argv[1:])
