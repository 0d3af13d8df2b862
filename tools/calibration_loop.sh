#!/usr/bin/env bash
# The measure -> calibrate -> validate loop on the machine at hand, in one command. It builds
# what it needs, trains every scenario for real (per-layer profiles and the microbenchmarks,
# several interleaved rounds), validates each with --holdout every-other-batch (calibrated on half
# the batch sizes, the uncalibrated figure beside it), calibrates one profile on all the files
# together, and prints a summary table last. Measurement files, reports, plots, the profile and
# machine.txt land in validate/data/<machine>/ (or --data).
#
#   tools/calibration_loop.sh                     # scenarios/calibration/gpu-*.yaml on one GPU
#   tools/calibration_loop.sh --device cpu tests/validate/scenarios/cpu-*.yaml   # CI's CPU loop
#
# A lent GPU machine (no package registry, a command limit, few files back) measures only, and
# the reports are made where epochcast is built (docs/guide.md, "Calibrating on a lent GPU"):
#   tools/calibration_loop.sh --fetch-deps .deps  # here: the Debian packages into .deps/
#   tools/calibration_loop.sh --deps .deps --measure-only --timeout 540 --out "$OUT"   # there
#   tools/calibration_loop.sh --no-measure --data validate/data/h100-sxm-1gpu   # here again
# LibTorch comes from the Python environment's PyTorch (torch.utils.cmake_prefix_path).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
  cat <<'EOF'

Options:
  --device auto|cpu|cuda  where `epochcast run` trains (default auto: the GPU when there is one)
  --hardware NAME         machine to predict for (default: the scenario's, or h200-sxm-1gpu
                          when the scenario says h100-sxm-1gpu and nvidia-smi names an H200,
                          or, with --no-measure, the --data folder's machine.txt does)
  --data DIR              where the files go (default validate/data/<machine>)
  --rounds N              passes over each sweep (default 3)
  --iterations N          timed iterations per point and round (default 20)
  --warmup N              warm-up iterations per point (default 3)
  --build DIR             build folder (default build, as tools/setup.sh makes it); built
                          there with the runtime unless it already holds what is needed
  --deps DIR              unpack DIR/*.deb (from --fetch-deps) and build against them
  --fetch-deps DIR        download the build's Debian packages into DIR, then stop
  --skip-tests            do not run the runtime's GPU tests before measuring
  --no-layer-profile      measure without --profile-layers (a large model's layer replays
                          cost some 60 steps a point; its kernel traces hold kernel times)
  --kernel-traces         on a GPU, also write each point's kernel trace (run --kernel-trace,
                          and the Python reference's), which calibrate fits the kernel model
                          to; needs PyTorch's own LibTorch (Kineto)
  --no-measure            keep the measurement files as they are and redo the calibrations and
                          reports (after a change to the simulator or the calibration)
  --measure-only          build only the runtime (no simulator, no Ceres) and measure: the
                          reports are made later with --no-measure where epochcast is built
  --timeout SECONDS       finish within SECONDS, the build included: each scenario gets its
                          share of what is left, a run cut short keeps its finished points
                          (--resume goes on), and the files are packed in time
  --out DIR               on exit, whatever happened, pack the data folder, the build logs and
                          this loop's log into DIR/calibration-loop.tar.gz (and the summary
                          into DIR/summary.txt): what a lent machine's $OUT brings back
  --dry-run               say what would be built, measured and packed, the time it is expected
                          to take and whether it fits --timeout and the machine's 8 files back;
                          nothing is built or run
EOF
}

# The Debian 12 packages the build needs beyond a compiler, CMake, CUDA and PyTorch.
DEB_PACKAGES=(libyaml-cpp-dev libyaml-cpp0.7 libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev
              catch2)
# What the time estimate assumes (a --dry-run prints it): a fresh 16-core machine builds the
# runtime alone in about 3 minutes (most of it LibTorch's headers), a run's start (CUDA context,
# cuDNN, the microbenchmarks) takes about 40 s, and one point of a small model 1.5 s a round (its
# partial batch, validation and fixed costs) plus its iterations at up to 20 ms each.
EST_BUILD_S=180 EST_TESTS_S=30 EST_RUN_START_S=40 EST_POINT_S=1.5 EST_ITERATION_S=0.02
# Where epochcast is built here the plan takes each point's step from `epochcast predict`
# instead of EST_ITERATION_S. A layer profile costs about 60 steps: 10 back-to-back calls x 5
# trials of every layer's forward and of its backward, with the forwards that prepare each
# backward trial. A kernel trace costs KERNEL_TRACE_STEPS steps (runtime/train/kernel_trace.h's
# kKernelTraceSteps, tools/pytorch_reference.py's KERNEL_TRACE_STEPS) and the time to write it;
# the Python reference its start (importing torch and the model's library), a model build per
# point and its two timed loops. EST_TRACE_S and EST_PYTHON_* are estimates no lent machine has
# timed yet: replace them with a campaign's figures.
EST_LAYER_PROFILE_STEPS=60 EST_TRACE_S=2 EST_PYTHON_START_S=8 EST_PYTHON_POINT_S=1
KERNEL_TRACE_STEPS=3
OUT_FILES_LIMIT=8  # files a lent machine brings back from $OUT

device=auto hardware="" data="" rounds=3 iterations=20 warmup=3 build=build deps=""
run_tests=1 measure=1 report=1 timeout=0 out="" dry_run=0 scenarios=() layer_profile=1
want_traces=0
while (($#)); do
  case "$1" in
    --device|--hardware|--data|--rounds|--iterations|--warmup|--build|--deps|--fetch-deps|\
    --timeout|--out)
      (($# >= 2)) || { echo "calibration_loop.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --device) device=$2; shift 2 ;;
    --hardware) hardware=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --deps) deps=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip-tests) run_tests=0; shift ;;
    --no-layer-profile) layer_profile=0; shift ;;
    --kernel-traces) want_traces=1; shift ;;
    --no-measure) measure=0; run_tests=0; shift ;;
    --measure-only) report=0; shift ;;
    --dry-run) dry_run=1; shift ;;
    --fetch-deps)
      mkdir -p "$2"
      # A fresh Debian has no package lists yet: fetch them (as root) when the download fails.
      (cd "$2" && { apt-get download "${DEB_PACKAGES[@]}" 2> /dev/null \
        || { apt-get update -qq && apt-get download "${DEB_PACKAGES[@]}"; }; })
      echo "fetched into $2: carry it to the GPU machine and pass --deps $2"
      exit 0 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "calibration_loop.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) scenarios+=("$1"); shift ;;
  esac
done
for n in rounds iterations warmup timeout; do
  [[ ${!n} =~ ^[0-9]+$ ]] || {
    echo "calibration_loop.sh: --$n expects a whole number, got '${!n}'" >&2; exit 2; }
done
case $device in auto|cpu|cuda) ;; *)
  echo "calibration_loop.sh: --device expects auto, cpu or cuda, got '$device'" >&2; exit 2 ;;
esac
if ((!measure && !report)); then
  echo "calibration_loop.sh: --no-measure and --measure-only together leave nothing to do" >&2
  exit 2
fi
((${#scenarios[@]})) || scenarios=(scenarios/calibration/gpu-*.yaml)
for s in "${scenarios[@]}"; do
  [[ -f $s ]] || { echo "calibration_loop.sh: no scenario file '$s'" >&2; exit 2; }
done

started=$SECONDS
seconds_left() {  # of --timeout; a large number without one
  if ((timeout > 0)); then echo $((timeout - (SECONDS - started))); else echo 999999; fi
}
has_gpu() { command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; }

if [[ -z $hardware ]]; then
  if ((!measure)) && [[ -n $data && -f $data/machine.txt ]]; then
    # Reports of measurements made elsewhere go by the card that measured them, as the data
    # folder's machine.txt names it, whatever card this machine has.
    if grep -q "^NVIDIA H200" "$data/machine.txt"; then hardware_h200=1; fi
  elif has_gpu && nvidia-smi -L | grep -q "H200"; then
    hardware_h200=1
  fi
fi
machine_of() {  # the machine a scenario runs on here
  local named
  named=$(sed -n 's/^hardware: *\([^ #]*\).*/\1/p' "$1")
  if [[ -n $hardware ]]; then echo "$hardware"
  elif [[ ${hardware_h200:-0} == 1 && $named == h100-sxm-1gpu ]]; then echo h200-sxm-1gpu
  else echo "$named"; fi
}
first_machine=$(machine_of "${scenarios[0]}")
data=${data:-validate/data/$(basename "$first_machine" .yaml)}

# The points of a scenario's sweep: the product of its `gpus:` and `batch:` lists.
sweep_points() {
  local gpus batches
  gpus=$(sed -n 's/^ *gpus: *\[\(.*\)\].*/\1/p' "$1" | head -1 | tr ',' ' ' | wc -w)
  batches=$(sed -n 's/^ *batch: *\[\(.*\)\].*/\1/p' "$1" | head -1 | tr ',' ' ' | wc -w)
  echo $((${gpus:-1} * ${batches:-1}))
}

# Each point's predicted step (seconds, space-separated), where epochcast is built here and
# python3 reads its JSON; nothing otherwise.
predicted_steps() {
  [[ -x $build/cli/epochcast ]] && command -v python3 > /dev/null || return 1
  "$build/cli/epochcast" predict "$1" --set "hardware=$(machine_of "$1")" --json - 2> /dev/null \
    | python3 -c 'import json, sys
print(" ".join(str(p["iteration_s"]) for p in json.load(sys.stdin)["points"]))'
}

build_targets=()
((measure)) && build_targets+=(epochcast-run)
((measure && run_tests)) && build_targets+=(epochcast_cuda_tests)
((report)) && build_targets+=(epochcast)
needs_build=0
for t in "${build_targets[@]}"; do
  case $t in
    epochcast-run|epochcast) [[ -x $build/cli/$t ]] || needs_build=1 ;;
    *) [[ -x $build/tests/$t ]] || needs_build=1 ;;
  esac
done

# --- Dry run: the plan, its time, and what comes back ------------------------------------------
if ((dry_run)); then
  estimate=0
  echo "build: ${build_targets[*]} in $build/ ($( ((needs_build)) && echo "to build, about \
${EST_BUILD_S} s on 16 cores" || echo "already built"))"
  ((needs_build)) && estimate=$EST_BUILD_S
  if ((measure && run_tests)); then
    echo "tests: the runtime's GPU tests (ctest -L gpu) where there is a GPU, about ${EST_TESTS_S} s"
    estimate=$((estimate + EST_TESTS_S))
  fi
  if ((measure)); then
    # On a GPU: the Python reference as well (where PyTorch has CUDA there), and kernel traces
    # when asked for.
    on_gpu=$([[ $device != cpu ]] && echo 1 || echo 0)
    traced=$((on_gpu && want_traces))
    for s in "${scenarios[@]}"; do
      points=$(sweep_points "$s")
      steps=$(predicted_steps "$s") || steps=""
      [[ -n $steps ]] || steps=$(printf "$EST_ITERATION_S %.0s" $(seq "$points"))
      scenario_s=$(echo "$steps" | awk -v r="$rounds" -v i="$iterations" -v w="$warmup" \
        -v start="$EST_RUN_START_S" -v per="$EST_POINT_S" -v layers="$layer_profile" \
        -v layer_steps="$EST_LAYER_PROFILE_STEPS" -v gpu="$on_gpu" -v traced="$traced" \
        -v trace="$EST_TRACE_S" \
        -v trace_steps="$KERNEL_TRACE_STEPS" -v python_start="$EST_PYTHON_START_S" \
        -v python_point="$EST_PYTHON_POINT_S" '
        { for (k = 1; k <= NF; ++k) {
            t = $k
            total += per + r * (i + w) * t + layers * layer_steps * t
            if (gpu) total += python_point + 2 * (i + w) * t
            if (traced) total += 2 * (trace + trace_steps * t)
          } }
        END { printf "%d", start + gpu * python_start + total + 0.999 }')
      echo "measure: $s, $points points x $rounds rounds x ($warmup + $iterations) iterations" \
        "$( ((layer_profile)) && echo "with" || echo "without") layer profiles$( ((on_gpu)) \
          && echo ", with the Python reference")$( ((traced)) && echo " and kernel traces")," \
        "about $scenario_s s"
      estimate=$((estimate + scenario_s))
    done
  fi
  ((report)) && echo "report: validate (held out) and one joint profile into $data/"
  echo "expected: about $estimate s$( ((timeout > 0)) && echo " of the $timeout s allowed")"
  status=0
  if ((timeout > 0 && estimate > timeout)); then
    echo "does not fit: cut --rounds or --iterations, or measure fewer scenarios per command;" \
      "a run cut short by --timeout keeps its points and --resume goes on" >&2
    status=1
  fi
  if [[ -n $out ]]; then
    files=(calibration-loop.tar.gz)
    ((report)) && files+=(summary.txt)
    echo "into $out: ${files[*]} (${#files[@]} files of the $OUT_FILES_LIMIT a lent machine" \
      "brings back): $data/, $build.configure.log, $build.build.log, the loop's log"
    ((${#files[@]} <= OUT_FILES_LIMIT)) || status=1
  fi
  exit $status
fi

# --- On exit, whatever happened: pack what a lent machine brings back ---------------------------
log=""
if [[ -n $out ]]; then
  mkdir -p "$out" "$data"
  log="$data/calibration-loop.log"
  exec > >(tee -a "$log") 2>&1
  pack() {
    local status=$?
    set +e
    echo "== exit $status after $((SECONDS - started)) s: packing into $out"
    local logs=()
    for f in "$build.configure.log" "$build.build.log" "$build.tests.log"; do
      [[ -f $f ]] && logs+=("$f")
    done
    sleep 1  # let tee write the last lines
    tar czf "$out/calibration-loop.tar.gz" "$data" "${logs[@]}" 2> /dev/null
    [[ -f $data/summary.txt ]] && cp "$data/summary.txt" "$out/summary.txt"
    return $status
  }
  trap pack EXIT
fi

# --- Build -----------------------------------------------------------------------------------
prefix_path=""
if [[ -n $deps ]]; then
  # Unpacked beside the .debs, never into /: the packages' files must not replace the system's.
  mkdir -p "$deps/root"
  for f in "$deps"/*.deb; do dpkg -x "$f" "$deps/root"; done
  prefix_path="$(realpath "$deps/root/usr")"
  export LD_LIBRARY_PATH="$prefix_path/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if ((measure)) && torch_prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' \
    2> /dev/null); then
  # PyTorch's LibTorch (CUDA) takes precedence over Debian's CPU-only libtorch-dev.
  prefix_path="$torch_prefix${prefix_path:+;$prefix_path}"
fi
# Both switches said every time: a cache left by another kind of build keeps what is not said.
cmake_args=(-DCMAKE_BUILD_TYPE=Release
            -DEPOCHCAST_BUILD_RUNTIME=$( ((measure)) && echo ON || echo AUTO)
            -DEPOCHCAST_RUNTIME_ONLY=$( ((report)) && echo OFF || echo ON))
if [[ -n $prefix_path ]]; then cmake_args+=("-DCMAKE_PREFIX_PATH=$prefix_path"); fi
if ((measure)) && nccl_dir=$(python3 -c \
    'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2> /dev/null); then
  # PyTorch's own NCCL (the nvidia-nccl wheel) rather than the CUDA Toolkit's: LibTorch and
  # epochcast load one libnccl.so.2 between them, and it must be the one LibTorch was built with.
  cmake_args+=("-DEPOCHCAST_NCCL_INCLUDE=$nccl_dir/include"
               "-DEPOCHCAST_NCCL_LIBRARY=$(ls "$nccl_dir"/lib/libnccl.so* | head -1)")
fi
if ((needs_build)); then
  echo "== building ${build_targets[*]} in $build/"
  # Configured every time (incremental, cheap): a cache from another kind of build (without
  # the runtime, runtime-only, a configure cut short) must take this one's arguments.
  cmake -S . -B "$build" "${cmake_args[@]}" > "$build.configure.log" 2>&1 \
    || { tail -40 "$build.configure.log"; exit 1; }
  grep "epochcast runtime" "$build.configure.log" 2> /dev/null || true
  cmake --build "$build" -j"$(nproc)" --target "${build_targets[@]}" > "$build.build.log" 2>&1 \
    || { grep -B2 -A8 -m5 "error" "$build.build.log" || tail -50 "$build.build.log"; exit 1; }
  echo "   built in $((SECONDS - started)) s"
fi
# (A build without CUDA on a GPU machine: epochcast run itself says so and stops.)
epochcast="$build/cli/epochcast"
epochcast_run="$build/cli/epochcast-run"

mkdir -p "$data"
if ((measure)) && ((run_tests)) && has_gpu && [[ $device != cpu ]]; then
  # The CUDA API and NCCL on the real device before anything is measured with them. A failure
  # is reported, and the measurements still run: they say for themselves what works.
  echo "== the runtime's GPU tests"
  if ! timeout 120 ctest --test-dir "$build" -L gpu --output-on-failure \
      > "$build.tests.log" 2>&1; then
    echo "warning: the runtime's GPU tests failed (the measurements go on):" >&2
    tail -30 "$build.tests.log" >&2
  fi
fi

# --- Measure --------------------------------------------------------------------------------
warnings=0
# Kernel traces, when asked for, where the LibTorch built against is PyTorch's own with Kineto
# and a GPU: the Python environment's, as above (Debian's CPU-only libtorch has no Kineto).
kernel_traces=0
if ((measure && want_traces)) && [[ $device != cpu ]] && python3 -c 'import torch
assert torch.cuda.is_available() and torch.autograd.profiler.kineto_available()' 2> /dev/null
then
  kernel_traces=1
fi
if ((measure)); then
  commit="${EPOCHCAST_COMMIT:-$(git describe --always --dirty 2> /dev/null || echo unknown)}"
  command_line="$0 --device $device --rounds $rounds --iterations $iterations --warmup $warmup ${scenarios[*]}"
  # Measurement files already there are resumed (epochcast run refuses one measured with another
  # device, library or thread count): machine.txt keeps describing where their points were taken
  # and says when the run went on.
  resumed=0
  for ((k = 0; k < ${#scenarios[@]}; k++)); do
    if [[ -f $data/$(basename "${scenarios[k]}" .yaml).json ]]; then resumed=1; fi
  done
  if ((resumed)) && [[ -f $data/machine.txt ]]; then
    echo "resumed: $(date -u +%Y-%m-%dT%H:%M:%SZ) at $commit: $command_line" >> "$data/machine.txt"
  else
    {
      # EPOCHCAST_COMMIT first: a lent machine's copy of .git may not be the working tree's.
      echo "commit: $commit"
      echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
      echo "command: $command_line"
      if has_gpu; then nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
        --format=csv; fi
      # The environment as found; a CPU run sets LibTorch's, OpenMP's and the BLAS's threads to
      # the device's cores itself (runtime/measure/cpu_threads.h).
      echo "threads: OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-unset} (a CPU run computes on the device's cores: LibTorch, OpenMP and the BLAS set by epochcast run)"
      echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
      # What sets a CPU device's peak: its family (x86 family 26 is Zen 5) and vector extensions.
      echo "cpu_family: $(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
        "model $(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
      echo "cpu_vector: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
        grep -x 'avx2\|fma\|avx512f\|avx512_bf16\|amx_tile' | sort | tr '\n' ' ' | sed 's/ $//')"
    } > "$data/machine.txt"
  fi
  reserve=20  # seconds kept for packing the results
  for ((k = 0; k < ${#scenarios[@]}; k++)); do
    s=${scenarios[k]}
    machine=$(machine_of "$s")
    name=$(basename "$s" .yaml)
    measured="$data/$name.json"
    # Each scenario gets its share of the time left, so that a slow one cannot starve the rest.
    share=$((($(seconds_left) - reserve) / (${#scenarios[@]} - k)))
    if ((share < 30)); then
      echo "warning: $name not measured: ${share} s left for it (--timeout $timeout)" >&2
      warnings=$((warnings + 1))
      continue
    fi
    echo "== measuring $name on $machine$( ((timeout > 0)) && echo " (at most $share s)")"
    # --resume: a run cut short (a lease that ended, Ctrl-C, its share of --timeout) goes on
    # where it stopped; the microbenchmarks, saved before the first point, are not run again.
    bench=(--bench)
    if [[ -f $measured ]] && grep -q '"benchmarks"' "$measured"; then bench=(); fi
    # Under --timeout a point gets at most 2 minutes (or the share); else the runtime's default.
    point_timeout=()
    ((timeout > 0)) && point_timeout=(--timeout $((share < 120 ? share : 120)))
    # SIGTERM at the share's end: the run saves its finished points and stops; a second signal
    # 15 s later ends it whatever it is doing.
    # On a GPU with PyTorch's own LibTorch (Kineto built in): each point's kernel trace too,
    # every kernel's name, launch and GPU time (calibrate fits the kernel model to them).
    layers=()
    ((layer_profile)) && layers=(--profile-layers)
    traces=()
    if ((kernel_traces)); then
      mkdir -p "$data/kernels/$name"
      traces=(--kernel-trace "$data/kernels/$name")
    fi
    status=0
    timeout --signal=TERM --kill-after=15 "$share" \
      "$epochcast_run" run "$s" --set "hardware=$machine" --device "$device" "${layers[@]}" \
      "${bench[@]}" "${traces[@]}" --rounds "$rounds" --iterations "$iterations" \
      --warmup "$warmup" --resume "${point_timeout[@]}" --quiet -o "$measured" || status=$?
    if ((status != 0)); then
      # One scenario's failure (a point that failed, a crash, its time up) is a warning: the
      # others are still measured, and what this one finished is in its file.
      echo "warning: measuring $name ended with status $status; its finished points are in" \
        "$measured" >&2
      warnings=$((warnings + 1))
    fi
    if [[ $device != cpu ]] && python3 -c 'import torch; assert torch.cuda.is_available()' \
        2> /dev/null && (($(seconds_left) > reserve + 30)); then
      # The same model, batch sizes and optimizer in a plain PyTorch eager Python loop: what
      # the harness's step time is compared against (tools/pytorch_reference.py).
      left=$(($(seconds_left) - reserve))
      python_traces=()
      if ((kernel_traces)); then
        mkdir -p "$data/kernels/$name-pytorch"
        python_traces=(--kernel-trace "$data/kernels/$name-pytorch")
      fi
      timeout $((left < 60 ? left : 60)) python3 tools/pytorch_reference.py "$s" \
        --iterations "$iterations" --warmup "$warmup" "${python_traces[@]}" \
        -o "$data/$name.pytorch.json" \
        || { echo "warning: the PyTorch reference of $name failed" >&2; warnings=$((warnings + 1)); }
    fi
    # Traces compress about tenfold: what a lent machine brings back stays within its limits.
    if [[ -d $data/kernels ]]; then
      find "$data/kernels" -name '*.json' -exec gzip -f -9 {} +
    fi
  done
fi
if ((!report)); then
  echo "measured into $data/ with $warnings warning(s); make the reports where epochcast is" \
    "built: tools/calibration_loop.sh --no-measure --data $data ${scenarios[*]}"
  exit 0
fi

# --- Validate each model on held-out batch sizes ------------------------------------------------
files=()
for s in "${scenarios[@]}"; do
  machine=$(machine_of "$s")
  name=$(basename "$s" .yaml)
  measured="$data/$name.json"
  if [[ ! -f $measured ]]; then
    echo "calibration_loop.sh: there is no $measured to validate" >&2
    exit 2
  fi
  files+=("$measured")
  echo "== $name on $machine"
  plot=()
  if command -v gnuplot > /dev/null; then plot=(--plot "$data/$name.png"); fi
  # The batch sizes measured ok (run files write each point's global_batch before its status):
  # one alone (a single-point scenario, or a campaign cut short) leaves nothing to hold out, and
  # the file is validated with the machine's profile as it is.
  batches=$(awk '/"global_batch":/ { batch = $2 } /"status": "ok"/ { print batch }' "$measured" \
    | sort -u | wc -l)
  holdout=(--holdout every-other-batch)
  if ((batches < 2)); then
    echo "$name: $batches batch size(s) measured ok, none to hold out: validated uncalibrated"
    holdout=()
  fi
  "$epochcast" validate "$s" "$measured" --set "hardware=$machine" "${holdout[@]}" \
    --json "$data/$name.holdout.json" "${plot[@]}" | tee "$data/$name.holdout.txt"
done

# --- One profile from every model at once ------------------------------------------------------
# The profile a machine keeps: how well one profile serves every model is the last column of
# the summary (one model's held-out figure flatters a profile that only knows that model).
echo "== one profile from all ${#files[@]} files"
# Each run file records its scenario and --set arguments, so calibrate needs no --scenario.
# The kernel traces, where the measurements have them: kernel times the kernel model is fitted
# to beside the layers and epochs.
kernel_files=()
if [[ -d $data/kernels ]]; then
  while IFS= read -r -d '' trace; do kernel_files+=("$trace"); done \
    < <(find "$data/kernels" -name 'kernels-*.json*' -print0 | sort -z)
fi
"$epochcast" calibrate "${files[@]}" "${kernel_files[@]}" -o "$data/profile.yaml" \
  | tee "$data/profile.txt"
for s in "${scenarios[@]}"; do
  name=$(basename "$s" .yaml)
  "$epochcast" validate "$s" "$data/$name.json" --set "hardware=$(machine_of "$s")" \
    --profile "$data/profile.yaml" --json "$data/$name.profile.json" > "$data/$name.profile.txt"
done

# --- Summary -----------------------------------------------------------------------------------
# From the reports' text, so that the script needs nothing beyond bash and sed.
field() {
  local value
  value=$(sed -n "s/$2/\1/p" "$1" | head -1)
  [[ -n $value ]] || { echo "calibration_loop.sh: no figure for /$2/ in $1" >&2; exit 1; }
  echo "$value"
}
{
printf '\nHeld-out MAPE (calibrated on every other batch size, validated on the rest), %s:\n' \
  "$data"
printf '%-30s %9s %13s %15s %9s %6s %19s %20s\n' scenario "held out" uncalibrated \
  "loader measured" Spearman best "all, joint profile" "rounds, point strays"
for s in "${scenarios[@]}"; do
  name=$(basename "$s" .yaml)
  report="$data/$name.holdout.txt"
  joint=$(field "$data/$name.profile.txt" '^all points: .* MAPE \([0-9.]*\)%.*')
  if ! grep -q '^held-out points: ' "$report"; then
    # Nothing was held out (one batch size): its points against the machine's profile, then
    # against the joint one.
    all=$(field "$report" '^all points: .* MAPE \([0-9.]*\)%.*')
    printf '%-30s %9s %12s%% %15s %9s %6s %18s%% %20s\n' "$name" "-" "$all" "-" "-" "-" \
      "$joint" "-"
    continue
  fi
  held_out=$(field "$report" '^held-out points: .* MAPE \([0-9.]*\)%.*')
  uncalibrated=$(field "$report" '^uncalibrated (.*held-out MAPE \([0-9.]*\)%.*')
  # Where the scenario states no loader cost: the hardware's priors with the loader's own clock.
  loader=$(sed -n 's/^uncalibrated, loader measured .*held-out MAPE \([0-9.]*\)%.*/\1%/p' \
    "$report" | head -1)
  spearman=$(field "$report" '^held-out points: .* Spearman \([-0-9.]*\);.*')
  best=$(field "$report" '^held-out points: .*best configuration: \([a-z]*\).*')
  # How steady the machine was (validate's round drift; none for one round): the rounds' times
  # over the typical round's, and the robust scatter of a point's round beyond them.
  steadiness='^the machine over .* rounds took \([0-9.]*-[0-9.]*x\).* strayed \([0-9.]*%\).*'
  rounds=$(sed -n "s/$steadiness/\1 \2/p" "$report" | head -1)
  printf '%-30s %8s%% %12s%% %15s %9s %6s %18s%% %20s\n' "$name" "$held_out" "$uncalibrated" \
    "${loader:--}" "$spearman" "$best" "$joint" "${rounds:--}"
done
# The harness against the same model in a plain PyTorch eager loop, where one was run.
for s in "${scenarios[@]}"; do
  name=$(basename "$s" .yaml)
  if [[ -f $data/$name.pytorch.json ]] && command -v python3 > /dev/null; then
    python3 tools/pytorch_reference.py --compare "$data/$name.json" "$data/$name.pytorch.json"
  fi
done
} | tee "$data/summary.txt"
