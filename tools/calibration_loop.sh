#!/usr/bin/env bash
# The measure -> calibrate -> validate loop on the machine at hand, in one command. It builds
# epochcast with the runtime when needed, trains every scenario for real (per-layer profiles and
# the microbenchmarks, several interleaved rounds), validates each with --holdout
# every-other-batch (calibrated on half the batch sizes, the uncalibrated figure beside it),
# calibrates one profile on all the files together, and prints a summary table last. Measurement
# files, reports, plots, the profile and machine.txt land in validate/data/<machine>/ (or --data).
#
#   tools/calibration_loop.sh                     # scenarios/calibration/gpu-*.yaml on one GPU
#   tools/calibration_loop.sh --device cpu tests/validate/scenarios/cpu-*.yaml   # CI's CPU loop
#
# A GPU machine without a package registry (a cloud instance, a cluster node) builds with the
# Debian packages fetched beforehand on a Debian 12 machine that has one, then carried along:
#   tools/calibration_loop.sh --fetch-deps .deps  # on the Debian machine: the .debs into .deps/
#   tools/calibration_loop.sh --deps .deps        # on the GPU machine: unpacked into .deps/root
# LibTorch comes from the Python environment's PyTorch (torch.utils.cmake_prefix_path).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  cat <<'EOF'

Options:
  --device auto|cpu|cuda  where `epochcast run` trains (default auto: the GPU when there is one)
  --hardware NAME         machine to predict for (default: the scenario's, or h200-sxm-1gpu
                          when nvidia-smi names an H200 and the scenario says h100-sxm-1gpu)
  --data DIR              where the files go (default validate/data/<machine>)
  --rounds N              passes over each sweep (default 3)
  --iterations N          timed iterations per point and round (default 20)
  --warmup N              warm-up iterations per point (default 3)
  --build DIR             build folder (default build, as tools/setup.sh makes it); built
                          there with the runtime unless it already holds epochcast-run
  --deps DIR              unpack DIR/*.deb (from --fetch-deps) and build against them
  --fetch-deps DIR        download the build's Debian packages into DIR, then stop
  --skip-tests            do not run the runtime's GPU tests before measuring
  --no-measure            keep the measurement files as they are and redo the calibrations and
                          reports (after a change to the simulator or the calibration)
EOF
}

# The Debian 12 packages the build needs beyond a compiler, CMake, CUDA and PyTorch.
DEB_PACKAGES=(libyaml-cpp-dev libyaml-cpp0.7 libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev
              catch2)

device=auto hardware="" data="" rounds=3 iterations=20 warmup=3 build=build deps=""
run_tests=1 measure=1 scenarios=()
while (($#)); do
  case "$1" in
    --device|--hardware|--data|--rounds|--iterations|--warmup|--build|--deps|--fetch-deps)
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
    --skip-tests) run_tests=0; shift ;;
    --no-measure) measure=0; run_tests=0; shift ;;
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
((${#scenarios[@]})) || scenarios=(scenarios/calibration/gpu-*.yaml)
for s in "${scenarios[@]}"; do
  [[ -f $s ]] || { echo "calibration_loop.sh: no scenario file '$s'" >&2; exit 2; }
done

has_gpu() { command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; }

# --- Build -----------------------------------------------------------------------------------
prefix_path=""
if [[ -n $deps ]]; then
  # Unpacked beside the .debs, never into /: the packages' files must not replace the system's.
  mkdir -p "$deps/root"
  for f in "$deps"/*.deb; do dpkg -x "$f" "$deps/root"; done
  prefix_path="$(realpath "$deps/root/usr")"
  export LD_LIBRARY_PATH="$prefix_path/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if torch_prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2> /dev/null); then
  # PyTorch's LibTorch (CUDA) takes precedence over Debian's CPU-only libtorch-dev.
  prefix_path="$torch_prefix${prefix_path:+;$prefix_path}"
fi
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DEPOCHCAST_BUILD_RUNTIME=ON)
if [[ -n $prefix_path ]]; then cmake_args+=("-DCMAKE_PREFIX_PATH=$prefix_path"); fi
if nccl_dir=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' \
    2> /dev/null); then
  # PyTorch's own NCCL (the nvidia-nccl wheel) rather than the CUDA Toolkit's: LibTorch and
  # epochcast load one libnccl.so.2 between them, and it must be the one LibTorch was built with.
  cmake_args+=("-DEPOCHCAST_NCCL_INCLUDE=$nccl_dir/include"
               "-DEPOCHCAST_NCCL_LIBRARY=$(ls "$nccl_dir"/lib/libnccl.so* | head -1)")
fi
needed=$build/cli/epochcast-run
((measure)) || needed=$build/cli/epochcast  # reports alone need no runtime
if [[ ! -x $needed ]]; then
  echo "== building epochcast with the runtime in $build/"
  cmake -S . -B "$build" "${cmake_args[@]}" > "$build.configure.log" 2>&1 \
    || { cat "$build.configure.log"; exit 1; }
  grep "epochcast runtime" "$build.configure.log" || true
  cmake --build "$build" -j"$(nproc)" > "$build.build.log" 2>&1 \
    || { tail -50 "$build.build.log"; exit 1; }
fi
# (A build without CUDA on a GPU machine: epochcast run itself says so and stops.)
epochcast="$build/cli/epochcast"

if ((run_tests)) && has_gpu && [[ $device != cpu ]]; then
  # The CUDA API and NCCL on the real device before anything is measured with them.
  echo "== the runtime's GPU tests"
  ctest --test-dir "$build" -L gpu --output-on-failure
fi

# --- Measure, validate each model on held-out batch sizes --------------------------------------
if [[ -z $hardware ]] && has_gpu && nvidia-smi -L | grep -q "H200"; then
  hardware_h200=1
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
mkdir -p "$data"

if ((measure)); then
  {
    echo "commit: $(git describe --always --dirty 2> /dev/null || echo unknown)"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "command: $0 --device $device --rounds $rounds --iterations $iterations --warmup $warmup ${scenarios[*]}"
    if has_gpu; then nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
      --format=csv; fi
    echo "threads: OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-unset}"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
  } > "$data/machine.txt"
fi

files=()
for s in "${scenarios[@]}"; do
  machine=$(machine_of "$s")
  name=$(basename "$s" .yaml)
  measured="$data/$name.json"
  files+=("$measured")
  echo "== $name on $machine"
  if ((measure)); then
    # --resume: a run cut short (a lease that ended, Ctrl-C) goes on where it stopped; the
    # microbenchmarks, saved before the first point, are not run again.
    bench=(--bench)
    if [[ -f $measured ]] && grep -q '"benchmarks"' "$measured"; then bench=(); fi
    "$epochcast" run "$s" --set "hardware=$machine" --device "$device" --profile-layers \
      "${bench[@]}" --rounds "$rounds" --iterations "$iterations" --warmup "$warmup" --resume \
      --quiet -o "$measured"
  elif [[ ! -f $measured ]]; then
    echo "calibration_loop.sh: --no-measure, but there is no $measured" >&2
    exit 2
  fi
  plot=()
  if command -v gnuplot > /dev/null; then plot=(--plot "$data/$name.png"); fi
  "$epochcast" validate "$s" "$measured" --set "hardware=$machine" --holdout every-other-batch \
    --json "$data/$name.holdout.json" "${plot[@]}" | tee "$data/$name.holdout.txt"
done

# --- One profile from every model at once ------------------------------------------------------
# The profile a machine keeps: how well one profile serves every model is the last column of
# the summary (one model's held-out figure flatters a profile that only knows that model).
echo "== one profile from all ${#files[@]} files"
# Each run file records its scenario and --set arguments, so calibrate needs no --scenario.
"$epochcast" calibrate "${files[@]}" -o "$data/profile.yaml" | tee "$data/profile.txt"
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
printf '\nHeld-out MAPE (calibrated on every other batch size, validated on the rest), %s:\n' \
  "$data"
printf '%-30s %9s %13s %9s %6s %19s\n' scenario "held out" uncalibrated Spearman best \
  "all, joint profile"
for s in "${scenarios[@]}"; do
  name=$(basename "$s" .yaml)
  report="$data/$name.holdout.txt"
  held_out=$(field "$report" '^held-out points: .* MAPE \([0-9.]*\)%.*')
  uncalibrated=$(field "$report" '^uncalibrated .*held-out MAPE \([0-9.]*\)%.*')
  spearman=$(field "$report" '^held-out points: .* Spearman \([-0-9.]*\);.*')
  best=$(field "$report" '^held-out points: .*best configuration: \([a-z]*\).*')
  joint=$(field "$data/$name.profile.txt" '^all points: .* MAPE \([0-9.]*\)%.*')
  printf '%-30s %8s%% %12s%% %9s %6s %18s%%\n' "$name" "$held_out" "$uncalibrated" "$spearman" \
    "$best" "$joint"
done
