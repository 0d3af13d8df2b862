#!/usr/bin/env bash
# `epochcast run` on two ranks started as torchrun and plain srun start them — each process with
# the launcher's variables alone (RANK, WORLD_SIZE, LOCAL_RANK; or SLURM_PROCID, SLURM_NTASKS,
# SLURM_LOCALID in a job step) and MASTER_ADDR/MASTER_PORT — so no launcher is needed: the ranks
# meet over TCP, train ddp and fsdp on the CPU, and end with the parameters mpirun's ranks end
# with (parameters_hash), or where there is no mpirun, with each other's. Then through PyTorch's
# own torchrun when it is installed (skipped otherwise), and plain srun's variables without
# MASTER_ADDR refused with the lines to export (exit 2).
# Usage: check_launchers.sh EPOCHCAST SOURCE_DIR [MPIEXEC]
set -euo pipefail
epochcast=$(readlink -f "$1") source=$2 mpiexec=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Whatever launched this script (a CI job under Slurm or mpirun) is not what is tested here.
unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK PMI_RANK PMI_SIZE \
  PMIX_RANK MPI_LOCALRANKID RANK WORLD_SIZE LOCAL_RANK SLURM_PROCID SLURM_NTASKS SLURM_LOCALID \
  SLURM_STEP_ID SLURM_STEP_NUM_TASKS MASTER_ADDR MASTER_PORT TORCHELASTIC_USE_AGENT_STORE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
  OMPI_MCA_plm_rsh_agent=false
cd "$source"
quick=(--warmup 1 --iterations 3 --validation-iterations 1 --quiet)
python=$(command -v /usr/bin/python3 python3 | head -n 1 || true)

# A port nothing listens on now, and the one after it (torchrun's static rendezvous keeps its
# own store on the first).
free_port() {
  local port
  for _ in $(seq 50); do
    port=$((20000 + RANDOM % 40000))
    if ! (: < "/dev/tcp/127.0.0.1/$port") 2> /dev/null &&
      ! (: < "/dev/tcp/127.0.0.1/$((port + 1))") 2> /dev/null; then
      echo "$port"
      return
    fi
  done
  echo "no free port found" >&2
  exit 1
}

fail() {  # message, then log files to show; on standard error (the callers' output is data)
  {
    echo "$1"
    shift
    for log in "$@"; do
      echo "--- $log"
      cat "$log"
    done
  } >&2
  exit 1
}

# The points' hashes of a measurement file, in order, after checking that every point is ok on
# the ranks it needed and that the file names `launcher`.
hashes() {  # file, launcher
  local file=$1 launcher=$2
  grep -q "\"launcher\": \"$launcher\"" "$file" || fail "$file does not name launcher $launcher" "$file"
  if grep -q '"status": "\(failed\|skipped\|timeout\|oom\)"' "$file" ||
    grep -q '"parameters_identical": false' "$file"; then
    fail "$file: a point did not end ok with identical parameters" "$file"
  fi
  grep -o '"parameters_hash": "[0-9a-f]*"' "$file" | sed 's/.*: "\(.*\)"/\1/' | paste -sd ' '
}

# `epochcast run SCENARIO` on two ranks with `style`'s variables; the file's hashes.
two_ranks() {  # style (torchrun|slurm), scenario, more arguments
  local style=$1 scenario=$2
  shift 2
  local port out="$work/$style.json"
  port=$(free_port)
  rm -f "$out"
  local started=()
  for rank in 0 1; do
    if [[ $style == torchrun ]]; then
      variables=("RANK=$rank" WORLD_SIZE=2 "LOCAL_RANK=$rank")
    else
      variables=(SLURM_STEP_ID=0 "SLURM_PROCID=$rank" SLURM_NTASKS=2 "SLURM_LOCALID=$rank")
    fi
    # One LibTorch thread per rank, as torchrun sets and as mpirun's binding to a core gives.
    env "${variables[@]}" OMP_NUM_THREADS=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" timeout 300 \
      "$epochcast" run "$scenario" -o "$out" "${quick[@]}" "$@" > "$work/$style-$rank.log" 2>&1 &
    started+=($!)
  done
  local status=0
  for pid in "${started[@]}"; do wait "$pid" || status=$?; done
  # A rank that failed alone leaves no other waiting: each has `timeout` too.
  [[ $status -eq 0 ]] || kill "${started[@]}" 2> /dev/null || true
  [[ $status -eq 0 ]] || fail "$style-style ranks of $scenario $*: exit $status" \
    "$work/$style-0.log" "$work/$style-1.log"
  hashes "$out" "$([[ $style == torchrun ]] && echo torchrun || echo slurm)"
}

for case in "ddp-2rank-cpu" "fsdp-2rank-cpu" "fsdp-2rank-cpu --set training.strategy=zero2"; do
  read -r scenario settings <<< "$case"
  file="tests/runtime/scenarios/$scenario.yaml"
  # shellcheck disable=SC2086  # settings: words on purpose
  torchrun_style=$(two_ranks torchrun "$file" $settings)
  # shellcheck disable=SC2086
  slurm_style=$(two_ranks slurm "$file" $settings)
  [[ -n $torchrun_style ]] || fail "$case: no parameters_hash under torchrun's variables"
  [[ $torchrun_style == "$slurm_style" ]] ||
    fail "$case: torchrun's variables gave $torchrun_style, srun's $slurm_style"
  message="torchrun's and srun's variables end with the same parameters"
  if [[ -n $mpiexec ]]; then
    # shellcheck disable=SC2086
    timeout 300 "$mpiexec" --oversubscribe -np 2 "$epochcast" run "$file" -o "$work/mpi.json" \
      "${quick[@]}" $settings > "$work/mpi.log" 2>&1 || fail "$case under mpirun failed" "$work/mpi.log"
    mpi=$(hashes "$work/mpi.json" mpi)
    [[ $torchrun_style == "$mpi" ]] ||
      fail "$case: over TCP the parameters are $torchrun_style, under mpirun $mpi"
    message="torchrun's and srun's variables end with mpirun's parameters"
  fi
  [[ $case != ddp-2rank-cpu ]] || ddp_reference=$torchrun_style
  echo "$case: $message ($torchrun_style)"
done

# PyTorch's own torchrun, when it is installed and starts processes here (a probe with `true`):
# its default static rendezvous, whose store holds MASTER_PORT, and --standalone's (c10d, a free
# port); offline both. `--redirects 1 --tee 1`: PyTorch 1.13's torchrun under Python 3.11 fails
# on its default "0" (it looks the value up among the Flag's members, which skip 0 there).
torchrun=("$python" -m torch.distributed.run --redirects 1 --tee 1)
if [[ -n $python ]] && timeout 120 "${torchrun[@]}" --nproc_per_node 2 --master_port "$(free_port)"   --no_python true > "$work/probe.log" 2>&1; then
  for rendezvous in static standalone; do
    options=(--nproc_per_node 2 --master_port "$(free_port)")
    [[ $rendezvous == standalone ]] && options=(--nproc_per_node 2 --standalone)
    rm -f "$work/real.json"
    timeout 300 "${torchrun[@]}" "${options[@]}" --no_python \
      "$epochcast" run tests/runtime/scenarios/ddp-2rank-cpu.yaml -o "$work/real.json" \
      "${quick[@]}" > "$work/torchrun.log" 2>&1 ||
      fail "torchrun ($rendezvous rendezvous) failed" "$work/torchrun.log"
    real=$(hashes "$work/real.json" torchrun)
    [[ $real == "$ddp_reference" ]] ||
      fail "torchrun ($rendezvous): parameters $real, started by hand $ddp_reference"
    echo "PyTorch's torchrun ($rendezvous rendezvous): the same parameters"
  done
else
  echo "PyTorch's torchrun: not installed or cannot start processes here, skipped"
fi

# Plain srun's variables without MASTER_ADDR: refused as bad input, with the lines to export.
set +e
env SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1 "$epochcast" run \
  tests/runtime/scenarios/ddp-2rank-cpu.yaml -o "$work/refused.json" > "$work/refused.log" 2>&1
status=$?
set -e
# shellcheck disable=SC2016  # the line as the message prints it, unexpanded
export_line='export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
if [[ $status -ne 2 ]] || ! grep -q "error: MASTER_ADDR" "$work/refused.log" ||
  ! grep -qF "$export_line" "$work/refused.log" ||
  ! grep -q "export MASTER_PORT=" "$work/refused.log"; then
  fail "plain srun's variables without MASTER_ADDR: exit $status" "$work/refused.log"
fi
echo "plain srun's variables without MASTER_ADDR: refused with the lines to export, exit 2"
