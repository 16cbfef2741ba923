#!/usr/bin/env bash
# Run the test suite on each tested environment, each in its own virtual environment:
#
#   py311-torch213  Python 3.11, torch 2.13.0 (the CPU build where pip's configuration provides
#                   it, as in .ci/run) and the [test] extra's pins: what the README's commands install
#   py312-torch214  Python 3.12, torch 2.14.0 from PyPI (the default, CUDA-enabled build, as a
#                   Trainium host gets it; a large download) with the same Hugging Face pins
#
# TorchNeuron ships for Python 3.12-3.14 with torch 2.13 and 2.14; the shim and the tests must not
# depend on which build of torch is installed.
#
# usage: scripts/matrix.sh [py311-torch213|py312-torch214|all] [pytest arguments...]
#   MATRIX_DIR (default $TMPDIR/neuroncompat-matrix, TMPDIR defaulting to /tmp) holds the virtual environments; they are reused.
#   PYTHON311 / PYTHON312 name the interpreters (default python3.11 / python3.12).
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
exit $status
