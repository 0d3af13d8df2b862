#!/usr/bin/env bash
# `epochcast predict|compare ... --shard K/N --shard-output FILE` for every K, then `epochcast
# merge` of the files in any order, writes what the serial run writes, byte for byte: the table,
# the CSV and the JSON, for 1, 2 and 5 shards. A point's input error comes out of merge as the
# serial run reports it; merge refuses a missing, repeated, foreign or damaged shard (exit 2);
# --shard auto reads a Slurm array task or a Kubernetes indexed Job's index; torchrun and plain
# srun launches are refused on every process. With MPIEXEC, a shard spread over MPI processes
# writes the same file as a shard run alone.
# Usage: check_shard_merge.sh EPOCHCAST SOURCE_DIR [MPIEXEC]
set -euo pipefail
epochcast=$(readlink -f "$1") source=$2 mpiexec=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Whatever launched the test, the commands below see only the variables each check sets.
unset SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_MAX SLURM_ARRAY_TASK_STEP \
  SLURM_ARRAY_TASK_COUNT JOB_COMPLETION_INDEX RANK WORLD_SIZE LOCAL_RANK SLURM_PROCID \
  SLURM_NTASKS SLURM_LOCALID SLURM_STEP_ID SLURM_STEP_NUM_TASKS PMI_RANK PMI_SIZE PMIX_RANK \
  OMPI_COMM_WORLD_RANK \
  OMPI_COMM_WORLD_SIZE COLUMNS
cd "$source"
fail() {
  echo "FAILED: $*"
  exit 1
}
# The files of shards 1 to N, in an order that is not 1 to N (a fixed shuffle).
shuffled() {  # N, then the file name's stem
  local n=$1 stem=$2
  for k in $(seq "$n" | shuf --random-source=<(yes)); do echo "$stem-$k.json"; done
}
same_as_serial() {  # what, then the run's stem (its .txt, .csv and .json beside the serial's)
  local what=$1 run=$2
  for kind in txt csv json; do
    if ! cmp -s "$work/serial.$kind" "$run.$kind"; then
      echo "FAILED: $what: the $kind differs from the serial run's:"
      diff "$work/serial.$kind" "$run.$kind" | head -20
      exit 1
    fi
  done
}
check() {  # name, then the epochcast arguments
  local name=$1
  shift
  "$epochcast" "$@" --csv "$work/serial.csv" --json "$work/serial.json" > "$work/serial.txt"
  for n in 1 2 5; do
    rm -f "$work"/shard-*.json
    for k in $(seq "$n"); do
      "$epochcast" "$@" --shard "$k/$n" --shard-output "$work/shard-$k.json" > /dev/null
    done
    mapfile -t files < <(shuffled "$n" "$work/shard")
    "$epochcast" merge "${files[@]}" --csv "$work/merged.csv" --json "$work/merged.json" \
      > "$work/merged.txt"
    same_as_serial "$name in $n shards" "$work/merged"
  done
  echo "$name: 1, 2 and 5 shards merged in shuffled order write the serial run's output"
}
check "seed 001's sweep" predict scenarios/seed-001/linear.yaml
check "stragglers and faults (every rank)" predict scenarios/what-if/stragglers-and-faults-h100.yaml
check "compare" compare scenarios/seed-001/linear.yaml --hardware seed001-box --hardware dgx-a100 \
  --gpus 1,2 --batch 64,128

# Each option of the table travels through merge too (--wide, --explain-scaling, --details).
"$epochcast" predict scenarios/seed-001/linear.yaml --gpus 1,2 --wide --explain-scaling \
  > "$work/serial.txt"
for k in 1 2; do
  "$epochcast" predict scenarios/seed-001/linear.yaml --gpus 1,2 --shard "$k/2" \
    --shard-output "$work/wide-$k.json" > /dev/null
done
"$epochcast" merge "$work/wide-2.json" "$work/wide-1.json" --wide --explain-scaling \
  > "$work/merged.txt"
cmp -s "$work/serial.txt" "$work/merged.txt" || fail "merge --wide --explain-scaling differs"
echo "merge --wide --explain-scaling: the serial run's table"

# A point's input error: merge reports the lowest-numbered failing point as the serial run does,
# with its exit status; each shard records its points' errors and exits 0.
sed 's/links: \[{node: 2, nic: 3, bandwidth: 0.5}\]/links: [{node: 1, nic: 0, down: true}, {node: 1, nic: 1, down: true}, {node: 1, nic: 2, down: true}, {node: 1, nic: 3, down: true}, {node: 1, nic: 4, down: true}, {node: 1, nic: 5, down: true}, {node: 1, nic: 6, down: true}, {node: 1, nic: 7, down: true}]/' \
  scenarios/what-if/stragglers-and-faults-h100.yaml > "$work/cut.yaml"
error_through_shards() {  # name, the table's options (not a shard's), then the arguments
  local name=$1 status serial_status
  local -a table_options
  read -ra table_options <<< "$2"
  shift 2
  set +e
  "$epochcast" "$@" "${table_options[@]}" > "$work/serial.txt" 2> "$work/serial-err.txt"
  serial_status=$?
  set -e
  [[ $serial_status -eq 2 ]] || fail "$name: the serial run exits $serial_status, not 2"
  rm -f "$work"/cut-*.json
  for k in 1 2 3; do
    "$epochcast" "$@" --shard "$k/3" --shard-output "$work/cut-$k.json" > /dev/null 2>&1 ||
      fail "$name: shard $k/3 exits $? (its points' errors are merge's to report)"
  done
  set +e
  "$epochcast" merge "$work/cut-3.json" "$work/cut-1.json" "$work/cut-2.json" \
    "${table_options[@]}" > "$work/merged.txt" 2> "$work/merged-err.txt"
  status=$?
  set -e
  if [[ $status -ne $serial_status ]] || ! cmp -s "$work/serial-err.txt" "$work/merged-err.txt" ||
    ! cmp -s "$work/serial.txt" "$work/merged.txt"; then
    echo "FAILED: $name: merge exits $status (serial $serial_status) and says:"
    cat "$work/merged-err.txt"
    echo "where the serial run says:"
    cat "$work/serial-err.txt"
    exit 1
  fi
  echo "$name: merge reports the serial run's error, exit $status"
}
error_through_shards "a point's input error" "" predict "$work/cut.yaml"
error_through_shards "a point's input error on the first of two machines" "" \
  compare "$work/cut.yaml" --hardware dgx-h100-cluster --hardware dgx-h100-cluster
# The second machine fails to load: the first one's table (--details), then its error.
error_through_shards "a machine that fails to load after another" "--details" \
  compare scenarios/seed-001/linear.yaml --hardware seed001-box --hardware no-such-machine \
  --gpus 1,2 --batch 64,128

# Refusals, each exit 2 with the file (or option) and what to do.
refused() {  # name, what the message must hold, then the command
  local name=$1 want=$2 status
  shift 2
  set +e
  "$@" > "$work/out.txt" 2>&1
  status=$?
  set -e
  if [[ $status -ne 2 ]] || ! grep -qF -- "$want" "$work/out.txt"; then
    echo "FAILED: $name: exit $status (want 2 and '$want'), output:"
    cat "$work/out.txt"
    exit 1
  fi
  echo "$name: refused, exit 2: $(head -c 160 "$work/out.txt")..."
}
rm -f "$work"/shard-*.json
for k in 1 2 3; do
  "$epochcast" predict scenarios/seed-001/linear.yaml --shard "$k/3" \
    --shard-output "$work/shard-$k.json" > /dev/null
done
refused "a missing shard" "shard 2 of 3 is missing (given: 1, 3); compute it with \`epochcast predict scenarios/seed-001/linear.yaml --shard 2/3" \
  "$epochcast" merge "$work/shard-3.json" "$work/shard-1.json"
cp "$work/shard-1.json" "$work/copy-of-1.json"
refused "a shard given twice" "$work/copy-of-1.json: error: shard: is shard 1 of 3 again" \
  "$epochcast" merge "$work/shard-1.json" "$work/shard-2.json" "$work/shard-3.json" \
  "$work/copy-of-1.json"
"$epochcast" predict scenarios/seed-001/linear.yaml --set training.epochs=2 --shard 2/3 \
  --shard-output "$work/other-2.json" > /dev/null
refused "a shard of another sweep" "$work/other-2.json: error: sweep: is a shard of \`epochcast predict scenarios/seed-001/linear.yaml --set training.epochs=2\`" \
  "$epochcast" merge "$work/shard-1.json" "$work/other-2.json" "$work/shard-3.json"
"$epochcast" predict scenarios/seed-001/linear.yaml --shard 2/4 \
  --shard-output "$work/split-2.json" > /dev/null
refused "a shard of another split" "is shard 2 of 4" \
  "$epochcast" merge "$work/shard-1.json" "$work/split-2.json" "$work/shard-3.json"
head -c 3000 "$work/shard-2.json" > "$work/cut-short.json"
refused "a truncated shard file" "$work/cut-short.json:" \
  "$epochcast" merge "$work/shard-1.json" "$work/cut-short.json" "$work/shard-3.json"
# One character of an outcome changed: the file's digest of its outcomes no longer matches.
sed '0,/"outcome": "AAAA/s//"outcome": "AAAB/' "$work/shard-2.json" > "$work/edited.json"
refused "an edited shard file" "compute the shard again (epochcast predict scenarios/seed-001/linear.yaml --shard 2/3 --shard-output" \
  "$epochcast" merge "$work/shard-1.json" "$work/edited.json" "$work/shard-3.json"
refused "a file that is no shard" "not a shard file" \
  "$epochcast" merge "$work/serial.json"
# The scenario changed between the shards, or after them: other inputs, refused.
cp scenarios/seed-001/linear.yaml "$work/own.yaml"
for k in 1 2; do
  "$epochcast" predict "$work/own.yaml" --gpus 1 --shard "$k/2" \
    --shard-output "$work/own-$k.json" > /dev/null
  sed -i "s/^description: .*/description: changed after shard $k/" "$work/own.yaml"
done
refused "shards of a scenario changed between them" "read other files than" \
  "$epochcast" merge "$work/own-1.json" "$work/own-2.json"
"$epochcast" predict "$work/own.yaml" --gpus 1 --shard 1/1 --shard-output "$work/own-all.json" \
  > /dev/null
sed -i 's/^description: .*/description: changed once more/' "$work/own.yaml"
refused "a scenario changed after the shards" "reads other files here than the shards read" \
  "$epochcast" merge "$work/own-all.json"
rm "$work/own.yaml"
refused "a scenario gone since the shards" "merge loads the shards' sweep again" \
  "$epochcast" merge "$work/own-all.json"
refused "merge's option of the other command" "is compare's, and these are shards of predict" \
  "$epochcast" merge "$work/shard-1.json" "$work/shard-2.json" "$work/shard-3.json" --details
refused "a shard's table options" "--csv: is epochcast merge's with --shard" \
  "$epochcast" predict scenarios/seed-001/linear.yaml --shard 1/2 --shard-output "$work/x.json" \
  --csv "$work/x.csv"
refused "a shard without its file" "needs --shard-output FILE" \
  "$epochcast" predict scenarios/seed-001/linear.yaml --shard 1/2
refused "shards counted from 0" "shards are numbered from 1 to 4" \
  "$epochcast" predict scenarios/seed-001/linear.yaml --shard 0/4 --shard-output "$work/x.json"
refused "--shard auto outside a job array" "neither is set" \
  "$epochcast" predict scenarios/seed-001/linear.yaml --shard auto --shard-output "$work/x.json"

# --shard auto in a Slurm array (sbatch --array=1-5: indices 1 to 5) and auto/N in a Kubernetes
# indexed Job (indices 0 to 4): the same shards as K/5, so merge writes the serial run's output.
"$epochcast" predict scenarios/seed-001/linear.yaml --csv "$work/serial.csv" \
  --json "$work/serial.json" > "$work/serial.txt"
for id in 1 2 3 4 5; do
  SLURM_ARRAY_TASK_ID=$id SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=5 SLURM_ARRAY_TASK_COUNT=5 \
    SLURM_PROCID=0 SLURM_NTASKS=1 \
    "$epochcast" predict scenarios/seed-001/linear.yaml --shard auto \
    --shard-output "$work/slurm-$id.json" > /dev/null
  cmp -s "$work/slurm-$id.json" <("$epochcast" predict scenarios/seed-001/linear.yaml \
    --shard "$id/5" --shard-output - 2> /dev/null) || fail "Slurm array task $id is not shard $id/5"
done
mapfile -t files < <(shuffled 5 "$work/slurm")
"$epochcast" merge "${files[@]}" --csv "$work/merged.csv" --json "$work/merged.json" \
  > "$work/merged.txt"
same_as_serial "a Slurm array's shards" "$work/merged"
echo "a Slurm array (--shard auto): the serial run's output"
for index in 0 1 2 3 4; do
  JOB_COMPLETION_INDEX=$index "$epochcast" predict scenarios/seed-001/linear.yaml \
    --shard auto/5 --shard-output "$work/k8s-$index.json" > /dev/null
done
"$epochcast" merge "$work"/k8s-{4,0,3,1,2}.json --csv "$work/merged.csv" \
  --json "$work/merged.json" > "$work/merged.txt"
same_as_serial "a Kubernetes indexed Job's shards" "$work/merged"
echo "a Kubernetes indexed Job (--shard auto/5): the serial run's output"
refused "a Kubernetes index without the Job's completions" "--shard auto/N" \
  env JOB_COMPLETION_INDEX=2 "$epochcast" predict scenarios/seed-001/linear.yaml --shard auto \
  --shard-output "$work/x.json"

# torchrun and srun without an MPI plugin start processes that make no MPI job: every one of them
# refuses (each would run the whole sweep and write the same files) and writes nothing.
for rank in 0 1; do
  refused "torchrun's rank $rank of 2" "torchrun started 2 processes of epochcast predict" \
    env RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank MASTER_ADDR=localhost MASTER_PORT=29500 \
    "$epochcast" predict scenarios/seed-001/linear.yaml --csv "$work/torchrun.csv"
  refused "plain srun's task $rank of 2" "srun (without --mpi) started 2 processes of epochcast compare" \
    env SLURM_STEP_ID=0 SLURM_PROCID=$rank SLURM_NTASKS=2 SLURM_LOCALID=$rank \
    "$epochcast" compare scenarios/seed-001/linear.yaml --hardware dgx-a100 \
    --json "$work/srun.json"
done
[[ ! -e $work/torchrun.csv && ! -e $work/srun.json ]] || fail "a refused launch wrote a file"
refused "merge started by torchrun" "2 processes of epochcast merge were started" \
  env RANK=1 WORLD_SIZE=2 "$epochcast" merge "$work"/shard-{1,2,3}.json
refused "torchrun around a shard" "mpirun -np 3 or srun --mpi=pmix" \
  env RANK=0 WORLD_SIZE=3 "$epochcast" predict scenarios/seed-001/linear.yaml --shard 1/2 \
  --shard-output "$work/x.json"
# One process of each is the process started alone.
RANK=0 WORLD_SIZE=1 "$epochcast" predict scenarios/seed-001/linear.yaml > "$work/one.txt"
SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 "$epochcast" predict scenarios/seed-001/linear.yaml \
  > "$work/one-srun.txt"
cmp -s "$work/serial.txt" "$work/one.txt" && cmp -s "$work/serial.txt" "$work/one-srun.txt" ||
  fail "torchrun or srun with one process differs from the serial run"
echo "torchrun and srun with one process: the serial run"

# A shard spread over MPI processes writes the file the shard writes alone.
if [[ -n $mpiexec ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
    OMPI_MCA_plm_rsh_agent=false
  "$mpiexec" --oversubscribe -np 2 "$epochcast" predict scenarios/seed-001/linear.yaml \
    --shard 2/3 --shard-output "$work/mpi-2.json" > /dev/null
  cmp -s "$work/shard-2.json" "$work/mpi-2.json" || fail "shard 2/3 over 2 MPI processes differs"
  echo "shard 2/3 over 2 MPI processes: the file it writes alone"
fi
echo "every shard check passed"
