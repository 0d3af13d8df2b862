#!/usr/bin/env bash
# Runs every command line of docs/guide.md that starts with `$ ` (the tutorial's commands, shown
# with their output), in order, in a scratch folder where scenarios/, topologies/, validate/,
# tests/ and docs/ lead to the source tree's and build/cli/ to the build's, and where the
# tutorial's own files are saved as a reader saves them: each ```yaml or ```python block whose
# last line of text before it says "save it as `NAME`" (as tests/scenarios/test_docs_examples.cpp
# reads them). The `$ ` and a trailing ` # comment` are stripped. A command must exit 0, or 2
# (bad input) when the output the guide shows under it says `error:`; the first that does not
# fails the test, with its output. The ```sh blocks (setup, GPUs, mpirun, schedulers) are not run.
# Commands that need a Python with PyTorch (`import --torch`) use Debian's /usr/bin/python3 where
# another python3 comes first, as check_readme_commands.sh does; without one, or without gnuplot
# for `--plot`, such a line is skipped and said so.
# Usage: check_guide_commands.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source=$(readlink -f "$1") build=$(readlink -f "$2")
guide="$source/docs/guide.md"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
for folder in scenarios topologies validate tests docs; do ln -s "$source/$folder" "$folder"; done
mkdir -p build
ln -s "$build/cli" build/cli
export PATH="$work/build/cli:$PATH"
have_torch=0
if /usr/bin/python3 -c 'import torch' 2> /dev/null; then
  export EPOCHCAST_PYTHON=/usr/bin/python3 have_torch=1
elif python3 -c 'import torch' 2> /dev/null; then
  have_torch=1
fi

# The tutorial's files: the block after a line that says "save it as `NAME`".
saved=$(awk -v dir="$work" '
  /^```(yaml|python)$/ && !open {
    open = 1
    name = ""
    if (match(before, /[Ss]ave (it|this) as `[^`]+`/)) {
      name = substr(before, RSTART, RLENGTH)
      sub(/^[^`]*`/, "", name); sub(/`$/, "", name)
      printf "" > (dir "/" name)
      count++
    }
    next
  }
  /^```/ && open { open = 0; if (name != "") close(dir "/" name); name = ""; before = ""; next }
  open && name != "" { print > (dir "/" name); next }
  !open && !/^```/ && NF { before = $0 }
  END { print count + 0 }' "$guide")
((saved >= 4)) || { echo "check_guide_commands.sh: saved only $saved tutorial files" >&2; exit 1; }

# Each `$ ` line with the status its shown output implies: 2 when `error:` appears before the
# next command or the end of the block, else 0. Lines: STATUS<TAB>COMMAND.
mapfile -t commands < <(awk '
  function flush() { if (command != "") print (error ? 2 : 0) "\t" command; command = ""; error = 0 }
  /^```/ { flush(); next }
  /^\$ / { flush(); command = substr($0, 3); next }
  command != "" && /error:/ { error = 1 }
  END { flush() }' "$guide")

ran=0 skipped=0
for entry in "${commands[@]}"; do
  expected=${entry%%$'\t'*}
  command=${entry#*$'\t'}
  command=${command%% # *}             # the comment after the command goes
  if [[ $command == *"--torch"* ]] && ((!have_torch)); then
    echo "- skipped (no Python with PyTorch): $command"; skipped=$((skipped + 1)); continue
  fi
  if [[ $command == *"--plot"* ]] && ! command -v gnuplot > /dev/null; then
    echo "- skipped (no gnuplot): $command"; skipped=$((skipped + 1)); continue
  fi
  echo "+ $command"
  status=0
  output=$(bash -c "$command" 2>&1) || status=$?
  if ((status != expected)) || { ((expected == 2)) && [[ $output != *"error:"* ]]; }; then
    echo "$output" | tail -30
    echo "check_guide_commands.sh: docs/guide.md's command exited $status, not $expected: $command" >&2
    exit 1
  fi
  ran=$((ran + 1))
done
echo "ran $ran command lines of docs/guide.md ($skipped skipped), $saved tutorial files saved"
((ran + skipped >= 20)) || { echo "check_guide_commands.sh: found only $((ran + skipped)) lines" >&2; exit 1; }
