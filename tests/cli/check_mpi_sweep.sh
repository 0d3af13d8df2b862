#!/usr/bin/env bash
# `mpirun -np N epochcast predict|compare ...` writes what the serial run writes, byte for byte:
# the table, the CSV and the JSON (points spread over 2 and 3 processes, gathered on process 0).
# Usage: check_mpi_sweep.sh EPOCHCAST MPIEXEC SOURCE_DIR
set -euo pipefail
epochcast=$(readlink -f "$1") mpiexec=$2 source=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
  OMPI_MCA_plm_rsh_agent=false
cd "$source"
check() {  # name, then the epochcast arguments (outputs go to $work/<run>.{csv,json,txt})
  local name=$1
  shift
  "$epochcast" "$@" --csv "$work/serial.csv" --json "$work/serial.json" > "$work/serial.txt"
  for n in 2 3; do
    "$mpiexec" --oversubscribe -np $n "$epochcast" "$@" --csv "$work/mpi.csv" \
      --json "$work/mpi.json" > "$work/mpi.txt"
    for kind in txt csv json; do
      if ! cmp -s "$work/serial.$kind" "$work/mpi.$kind"; then
        echo "$name: the $kind of $n processes differs from the serial run's:"
        diff "$work/serial.$kind" "$work/mpi.$kind" | head -20
        exit 1
      fi
    done
  done
  echo "$name: identical on 1, 2 and 3 processes"
}
check "seed 001's sweep" predict scenarios/seed-001/linear.yaml
check "stragglers and faults (every rank)" predict scenarios/what-if/stragglers-and-faults-h100.yaml
check "compare" compare scenarios/seed-001/linear.yaml --hardware seed001-box --hardware dgx-a100 \
  --gpus 1,2 --batch 64,128
# An input error is reported once, as the serial run reports it, with its exit status.
set +e
"$mpiexec" --oversubscribe -np 2 "$epochcast" predict scenarios/seed-001/linear.yaml \
  --set training.precison=fp32 > "$work/err.txt" 2>&1
status=$?
set -e
if [[ $status -ne 2 || $(grep -c "unknown key" "$work/err.txt") -ne 1 ]]; then
  echo "a bad key under mpirun: exit $status, output:"
  cat "$work/err.txt"
  exit 1
fi
echo "an input error: reported once, exit 2"

# A point that fails on the first of two machines stops every process (none waits for another).
sed 's/links: \[{node: 2, nic: 3, bandwidth: 0.5}\]/links: [{node: 1, nic: 0, down: true}, {node: 1, nic: 1, down: true}, {node: 1, nic: 2, down: true}, {node: 1, nic: 3, down: true}, {node: 1, nic: 4, down: true}, {node: 1, nic: 5, down: true}, {node: 1, nic: 6, down: true}, {node: 1, nic: 7, down: true}]/' \
  scenarios/what-if/stragglers-and-faults-h100.yaml > "$work/cut.yaml"
compare_cut=(compare "$work/cut.yaml" --hardware dgx-h100-cluster --hardware dgx-h100-cluster)
set +e
"$epochcast" "${compare_cut[@]}" > "$work/serial-err.txt" 2>&1
serial_status=$?
timeout 120 "$mpiexec" --oversubscribe -np 2 "$epochcast" "${compare_cut[@]}" > "$work/mpi-err.txt" 2>&1
status=$?
set -e
if [[ $serial_status -ne 2 || $status -ne 2 ]] || ! grep -qF "$(head -1 "$work/serial-err.txt")" "$work/mpi-err.txt"; then
  echo "a failing point under mpirun compare: exit $status (serial $serial_status), output:"
  cat "$work/mpi-err.txt"
  exit 1
fi
echo "a failing point on the first machine: every process stops, exit 2"

# A process that fails alone before the sweep (started where the scenario's relative path finds
# nothing) does not hang the others: process 0 says another process failed.
mkdir -p "$work/with" "$work/without"
cp scenarios/seed-001/linear.yaml "$work/with/own-scenario.yaml"
set +e
timeout 120 "$mpiexec" --oversubscribe \
  -np 1 sh -c "cd '$work/with' && exec '$epochcast' predict own-scenario.yaml" : \
  -np 1 sh -c "cd '$work/without' && exec '$epochcast' predict own-scenario.yaml" \
  > "$work/alone.txt" 2>&1
status=$?
set -e
if [[ $status -eq 0 || $status -eq 124 ]] || ! grep -q "another process of this MPI job failed" "$work/alone.txt"; then
  echo "a process failing alone under mpirun: exit $status, output:"
  cat "$work/alone.txt"
  exit 1
fi
echo "a process failing alone: process 0 reports it, exit $status"
