"""``python -m neuroncompat SCRIPT.py ARGS...``: run a script with the shim applied."""

import sys

from neuroncompat.runner import main

if __name__ == "__main__":
    main(sys.argv[1:])
