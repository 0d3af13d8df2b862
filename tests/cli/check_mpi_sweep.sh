#!/usr/bin/env bash
# `mpirun -np N epochcast predict|compare ...` writes what the serial run writes, byte for byte:
# the table, the CSV and the JSON (points spread over 2 and 3 processes, gathered on process 0).
# Usage: check_mpi_sweep.sh EPOCHCAST MPIEXEC SOURCE_DIR
set -euo pipefail
epochcast=$1 mpiexec=$2 source=$3
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
