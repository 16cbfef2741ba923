#!/usr/bin/env bash
# determinism.sh: run the tests that can race N times in a row (default 5); stop at the first red run.
#
# The tests that start jobs of several processes (marker `ranks`: torchrun, accelerate launch, mp.spawn)
# and those that read the simulated cores' memory statistics (marker `device_stats`) are where a suite
# turns flaky: ranks that share a pipe, a port taken between two launches, a count another thread moved.
# One green run proves little; five in a row, on the same 2 workers CI uses, is the bar before a change
# to these tests (or to tests/launch.py, the simulator's allocator or process group) lands.
#
# Usage, from the project root:  scripts/determinism.sh [RUNS] [extra pytest arguments...]
#   scripts/determinism.sh                      # 5 runs of `-m "ranks or device_stats"`
#   scripts/determinism.sh 3 -m device_stats    # 3 runs of the statistics tests only
# Exit status: 0 when every run passed, else that of the first failing run.
set -u
cd "$(dirname "$0")/.." || exit 2
runs=${1:-5}
shift $(( $# > 0 ? 1 : 0 ))
selection=(-m "ranks or device_stats")
for arg in "$@"; do [ "$arg" = -m ] && selection=(); done
export HF_HUB_OFFLINE=1
for run in $(seq 1 "$runs"); do
  start=$(date +%s)
  python -m pytest -n 2 -q -p no:cacheprovider "${selection[@]}" "$@"
  rc=$?
  echo "determinism: run $run of $runs: $([ $rc = 0 ] && echo green || echo "RED (exit $rc)") in $(( $(date +%s) - start )) s"
  [ $rc = 0 ] || exit $rc
done
echo "determinism: $runs of $runs green"
