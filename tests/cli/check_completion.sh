#!/usr/bin/env bash
# cli/completion.bash in a bash that sources it: a Tab after each command line below offers
# (at least) what it says. Usage: check_completion.sh SOURCE_DIR EPOCHCAST [HAS_RUNTIME]
set -uo pipefail
source_dir=$1 epochcast=$2 has_runtime=${3:-0}
# shellcheck source=/dev/null
source "$source_dir/cli/completion.bash"
failures=0

# What a Tab at the end of LINE offers, one a line: COMP_LINE and COMP_POINT as bash sets them,
# COMP_WORDS split as bash splits them (at blanks and at '=').
offered() {
  local line=$1
  COMP_LINE=$line COMP_POINT=${#line}
  read -ra COMP_WORDS <<< "${line//=/ = }"
  [[ $line == *" " ]] && COMP_WORDS+=("")
  COMP_WORDS[0]=$epochcast
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _epochcast
  printf '%s\n' "${COMPREPLY[@]}"
}
expect() {  # LINE, then what must be offered
  local line=$1 answer
  shift
  answer=$(cd "$source_dir" && offered "$line")
  for want in "$@"; do
    grep -qxF -- "$want" <<< "$answer" || {
      echo "FAILED: '$line<Tab>' does not offer '$want'; it offers:"
      sed 's/^/    /' <<< "$answer"
      failures=$((failures + 1))
    }
  done
}
refuse() {  # LINE, then what must not be offered
  local line=$1 answer
  shift
  answer=$(cd "$source_dir" && offered "$line")
  for unwanted in "$@"; do
    if grep -qxF -- "$unwanted" <<< "$answer"; then
      echo "FAILED: '$line<Tab>' offers '$unwanted'"
      failures=$((failures + 1))
    fi
  done
}

expect "epochcast " predict compare merge inspect topo collective calibrate validate kernels run bench
expect "epochcast pre" predict
refuse "epochcast pre" compare __complete
expect "epochcast predict " seed-001/linear what-if/ddp-resnet50-8gpu-boxes
expect "epochcast predict seed-001/l" seed-001/linear
expect "epochcast predict seed-001/linear --j" --jobs --json
expect "epochcast predict seed-001/linear --set " hardware=dgx-a100 training.precision=amp_bf16
expect "epochcast predict seed-001/linear --set hardware=dgx-h" dgx-h100 dgx-h200
expect "epochcast predict seed-001/linear --profile " default
expect "epochcast predict seed-001/linear --sh" --shard --shard-output
expect "epochcast predict seed-001/linear --shard " auto
expect "epochcast compare seed-001/linear --hardware dgx-a100 --sh" --shard --shard-output
expect "epochcast me" merge
expect "epochcast merge shard-1.json --" --csv --json --plot --wide --explain-scaling --details
refuse "epochcast merge " seed-001/linear
expect "epochcast inspect res" resnet-50
expect "epochcast inspect resnet-50 --hardware " dgx-a100 host-cpu
expect "epochcast inspect resnet-50 --precision amp_" amp_bf16 amp_fp16
expect "epochcast topo dgx-" dgx-a100 dgx-h100
expect "epochcast topo --fr" --from-nvidia-smi
expect "epochcast topo --from-nvidia-smi topo.txt --" --smi-query --gpu --output
expect "epochcast topo --from-nvidia-smi topo.txt --gpu h100" h100-sxm h100-pcie
refuse "epochcast topo --from-nvidia-smi topo.txt --gpu " host-cpu-1core
expect "epochcast collective dgx-h100 --" --help
expect "epochcast --v" --version
# Files beside the names: a scenario may be a path.
expect "epochcast predict scenarios/seed-0" scenarios/seed-001
if [[ $has_runtime == 1 ]]; then
  expect "epochcast run seed-001/linear --it" --iterations
  expect "epochcast bench --" --help
fi

if ((failures > 0)); then
  echo "$failures completion(s) missing"
  exit 1
fi
echo "every completion offered"
