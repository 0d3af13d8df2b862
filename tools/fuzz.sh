#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in their own build tree and runs a bounded
# campaign of each, starting from the committed corpus (tests/fuzz/corpus/<target>/), the
# hand-written seeds (tests/fuzz/seeds/<target>/: readable cases and the inputs of fixed
# findings) and the bundled files the target reads (scenarios, machines, measurements, ...).
# Prints each target's final figures (executions, cov, ft) and exits non-zero on any finding
# (crash, sanitizer report, leak, timeout, out-of-memory), naming the reproducer. See
# tests/fuzz/README.md.
#   FUZZ_SECONDS        seconds per target (default 60)
#   FUZZ_TIMEOUT        seconds one input may take (default 10)
#   FUZZ_TARGETS        the targets to run (default: all, see tests/fuzz/CMakeLists.txt)
#   FUZZ_BUILD_DIR      build tree (default build-fuzz next to the sources)
#   FUZZ_UPDATE_CORPUS  1: afterwards, minimise (-merge=1) what the campaign found together with
#                       the committed corpus into tests/fuzz/corpus/<target>/ (seeds and
#                       bundled files left out: they are inputs of every campaign anyway)
# Reproduce a finding from the source root: EPOCHCAST_DATA_DIR=. <build>/tests/fuzz/<target> FILE
# (EPOCHCAST_FUZZ_VERBOSE=1 makes the targets say what they made of the input; fuzz_predict
# prints an `epochcast predict` line).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
timeout=${FUZZ_TIMEOUT:-10}
targets=${FUZZ_TARGETS:-fuzz_loaders fuzz_predict fuzz_measurements_profiles fuzz_plot_text}
cxx=$(command -v clang++-14 || command -v clang++)
# The bundled machines and models the targets name: the sources' (a fuzz binary sits two folders
# below its build tree, where ../share/epochcast is not).
export EPOCHCAST_DATA_DIR=$src

mkdir -p "$build"
log="$build/build.log"
# shellcheck disable=SC2086  # $targets is a list of words
if ! { cmake -S "$src" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DEPOCHCAST_FUZZ=ON -DEPOCHCAST_BUILD_TESTS=OFF -DEPOCHCAST_BUILD_RUNTIME=OFF &&
       cmake --build "$build" --target $targets -j"$(nproc)"; } > "$log" 2>&1; then
  tail -50 "$log"
  echo "fuzz.sh: the build failed (whole log: $log)" >&2
  exit 1
fi

# Bundled files, named by their path in the source tree ('/' becomes '__') so that files of the
# same name in different folders stay apart.
copy_bundled() {  # target, then files relative to $src
  local dir="$build/bundled/$1" file name
  shift
  for file in "$@"; do
    name=${file//\//__}
    if [[ -e "$dir/$name" ]]; then
      echo "fuzz.sh: two bundled files map to $dir/$name" >&2
      exit 1
    fi
    cp "$src/$file" "$dir/$name"
  done
}
rm -rf "$build/bundled"
for target in $targets; do
  mkdir -p "$build/bundled/$target"
  case $target in
    fuzz_loaders)
      mapfile -t files < <(cd "$src" && { find scenarios topologies tests validate -path tests/fuzz -prune -o -name '*.yaml' -print;
        find tests/cli/nvidia_smi -name '*.txt'; } | sort) ;;
    fuzz_measurements_profiles)
      mapfile -t files < <(cd "$src" && { find validate tests -path tests/fuzz -prune -o -name '*.json' -print;
        grep -rlx --include='*.yaml' --exclude-dir=fuzz 'kind: profile' topologies validate tests;
        find tests/cli/data/nccl-tests-logs -name '*.txt'; } | sort) ;;
    *)
      files=() ;;  # structured inputs: the corpus and the seeds are the start
  esac
  if ((${#files[@]} > 0)); then copy_bundled "$target" "${files[@]}"; fi
done

max_len() {
  case $1 in
    fuzz_predict) echo 512 ;;
    fuzz_plot_text) echo 256 ;;  # a name; each input starts gnuplot
    fuzz_measurements_profiles) echo 40000 ;;  # the bundled measurement files are 25-33 kB
    *) echo 8192 ;;
  esac
}

# The committed corpus keeps inputs up to this size (larger ones are truncated when merged).
merge_len() {
  case $1 in
    fuzz_measurements_profiles) echo 4096 ;;  # variants of the bundled files stay out
    *) max_len "$1" ;;
  esac
}

# A campaign of each target; a finding stops that target, not the others.
failed=()
for target in $targets; do
  work="$build/corpus/$target"            # what this campaign adds (libFuzzer writes here)
  findings="$build/findings/$target"
  committed="$src/tests/fuzz/corpus/$target"
  seeds="$src/tests/fuzz/seeds/$target"
  mkdir -p "$work" "$findings" "$committed"
  inputs=("$committed" "$build/bundled/$target")
  if [[ -d $seeds ]]; then inputs+=("$seeds"); fi
  echo "== $target: $seconds s"
  status=0
  (cd "$build" && "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout="$timeout" \
     -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len="$(max_len "$target")" \
     -print_final_stats=1 -artifact_prefix="$findings/" \
     "$work" "${inputs[@]}") > "$build/$target.log" 2>&1 || status=$?
  # Final figures: the DONE line (cov, ft, corpus) and the execution count.
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$build/$target.log" | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/$target.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$build/$target.log" | tail -1)
  echo "   executions: ${execs:-?} (${rate:-?}/s)  ${done_line:-no DONE line}"
  if ((status != 0)); then
    failed+=("$target")
    echo "   FINDING (exit $status); log: $build/$target.log"
    grep -E 'ERROR: |==FUZZ FINDING==|SUMMARY: ' "$build/$target.log" | head -5 | sed 's/^/   /' ||
      true
    mapfile -t units < <(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$build/$target.log")
    for unit in "${units[@]}"; do
      echo "   reproducer: $unit"
      echo "   replay:     EPOCHCAST_DATA_DIR=$src $build/tests/fuzz/$target $unit"
      if [[ $target == fuzz_predict && -f $unit ]]; then
        EPOCHCAST_FUZZ_VERBOSE=1 "$build/tests/fuzz/$target" -timeout="$timeout" "$unit" 2>&1 |
          grep -E '^(fuzz_predict input|  epochcast predict|point |refused: )' | awk '!seen[$0]++' |
          sed 's/^ */   /' || true
      fi
    done
  elif [[ ${FUZZ_UPDATE_CORPUS:-0} == 1 ]]; then
    # Minimise into a fresh folder, bundled files and seeds first so that what they cover is not
    # kept again, then drop them (libFuzzer names a unit by its SHA-1). Edges only, no hit
    # counters, and inputs no longer than merge_len: the committed corpus stays small.
    merged="$build/merged/$target"
    rm -rf "$merged"
    mkdir -p "$merged"
    (cd "$build" && "$build/tests/fuzz/$target" -merge=1 -use_counters=0 -timeout="$timeout" \
       -rss_limit_mb=2048 -max_len="$(merge_len "$target")" \
       "$merged" "${inputs[@]:1}" "$committed" "$work") > "$build/$target.merge.log" 2>&1 ||
      { tail -20 "$build/$target.merge.log"; echo "fuzz.sh: merging $target failed" >&2; exit 1; }
    for seed in "${inputs[@]:1}"; do
      find "$seed" -type f -exec sha1sum {} + | while read -r sum _; do rm -f "$merged/$sum"; done
    done
    rm -rf "$committed"
    cp -r "$merged" "$committed"
    echo "   committed corpus: $(find "$committed" -type f | wc -l) files," \
      "$(find "$committed" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }') bytes"
  fi
done

if ((${#failed[@]} > 0)); then
  echo "fuzz.sh: findings in: ${failed[*]}" >&2
  exit 1
fi
