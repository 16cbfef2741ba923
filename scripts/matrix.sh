#!/usr/bin/env bash
# Run the test suite on each tested environment, each in its own virtual environment:
#
#   py311-torch213  Python 3.11, torch 2.13.0 (the CPU build where pip's configuration provides
#                   it, as in .ci/run) and the [test] extra's pins: what the README's commands install
#   py312-torch214  Python 3.12, torch 2.14.0 from PyPI (the default, CUDA-enabled build, as a
#                   Trainium host gets it; a large download) with the same Hugging Face pins
#   py310-light     Python 3.10, the codemod's light install (`pip install .`, no torch) and the test
#                   tools, running tests/migrate: neuron-migrate in a pre-commit hook or CI lint job
#                   runs on the user's Python (docs/python.md)
#
# TorchNeuron ships for Python 3.12-3.14 with torch 2.13 and 2.14; the shim and the tests must not
# depend on which build of torch is installed.
#
# usage: scripts/matrix.sh [py311-torch213|py312-torch214|py310-light|all] [pytest arguments...]
#   MATRIX_DIR (default $TMPDIR/neuroncompat-matrix, TMPDIR defaulting to /tmp) holds the virtual environments; they are reused.
#   PYTHON311 / PYTHON312 / PYTHON310 name the interpreters (default python3.11 / python3.12 / python3.10).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
unset PYTHONPATH NEURONCOMPAT_SIMULATE
root=${MATRIX_DIR:-${TMPDIR:-/tmp}/neuroncompat-matrix}
which=${1:-all}
shift || true

# The [pinned] and [test] requirements from pyproject.toml without torch, which each environment
# chooses (one source for the pins: the extras).
requirements() {
    "$1" - <<'PY'
import re, tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
for requirement in extras["pinned"] + extras["test"]:
    if not re.match(r"(torch|neuroncompat)\b", requirement):
        print(requirement)
PY
}

# The [test] extra's tools without the stack and the simulator's own test packages: what tests/migrate needs.
light_requirements() {
    "$1" - <<'PY'
import re, sys
if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib  # installed with the package on 3.10
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
for requirement in extras["test"]:
    if not re.match(r"(neuroncompat|kernels|expecttest|mypy|tomli)\b", requirement):
        print(requirement)
PY
}

run_light() {
    local name=$1 python=$2
    shift 2
    local venv=$root/$name
    echo "=== $name: $("$python" --version 2>&1), no torch"
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    "$venv/bin/pip" install -q .
    light_requirements "$venv/bin/python" > "$venv/requirements.txt"
    "$venv/bin/pip" install -q -r "$venv/requirements.txt"
    PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest tests/migrate "$@"
}

run() {
    local name=$1 python=$2 torch=$3
    shift 3
    local venv=$root/$name
    echo "=== $name: $("$python" --version 2>&1), torch==$torch"
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    requirements "$venv/bin/python" > "$venv/requirements.txt"
    "$venv/bin/pip" install -q "torch==$torch" -r "$venv/requirements.txt"
    "$venv/bin/pip" install -q --no-deps .
    "$venv/bin/python" -c "import torch, transformers as t; print('torch', torch.__version__, t.__version__)"
    PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest "$@"
}

status=0
if [ "$which" = all ] || [ "$which" = py311-torch213 ]; then
    run py311-torch213 "${PYTHON311:-python3.11}" 2.13.0 "$@" || status=1
fi
if [ "$which" = all ] || [ "$which" = py312-torch214 ]; then
    run py312-torch214 "${PYTHON312:-python3.12}" 2.14.0 "$@" || status=1
fi
if [ "$which" = all ] || [ "$which" = py310-light ]; then
    run_light py310-light "${PYTHON310:-python3.10}" "$@" || status=1
fi
exit $status
