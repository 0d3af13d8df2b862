#!/usr/bin/env bash
# Installs what epochcast needs on Debian 12 (apt, as root; only what is missing), then
# configures and builds it in build/.
#
#   tools/setup.sh           what a prediction needs: the simulator and build/cli/epochcast
#   tools/setup.sh --tests   everything: the runtime (LibTorch), the tests, the fuzz harnesses
#
# EPOCHCAST_WERROR=ON makes warnings errors (CI). The build goes through ccache when it is there,
# so a second clone on the same machine rebuilds in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

all=0
case "${1:-}" in
  "") ;;
  --tests) all=1 ;;
  -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup.sh: unknown option '$1' (expected nothing or --tests)" >&2; exit 2 ;;
esac

# What a prediction needs (compiler, CMake, the simulator's libraries, Ceres for calibrate,
# zlib for gzip-compressed kernel measurements, gnuplot for --plot), then what the runtime, the
# tests (git lists the sources the format check reads) and the fuzz campaigns add.
packages=(build-essential cmake ninja-build ccache pkg-config libyaml-cpp-dev libcli11-dev
          libfmt-dev nlohmann-json3-dev libceres-dev libeigen3-dev zlib1g-dev gnuplot-nox)
if ((all)); then
  packages+=(catch2 libbenchmark-dev clang-14 libfuzzer-14-dev libclang-rt-14-dev clang-format
             libtorch-dev libopenblas0-pthread libopenmpi-dev openmpi-bin
             dataset-fashion-mnist help2man file git python3-torch python3-torchvision)
fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup.sh: installing ${#missing[@]} Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi

# Ninja for a fresh build folder (an existing one keeps the generator it was made with).
generator=()
if [[ ! -f build/CMakeCache.txt ]] && command -v ninja > /dev/null; then generator=(-G Ninja); fi
# The tests are configured when Catch2 is there (after --tests once, a plain setup keeps them).
tests=OFF
if ((all)) || dpkg-query -W -f='${Status}' catch2 2>/dev/null | grep -q "install ok installed"; then
  tests=ON
fi
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DEPOCHCAST_BUILD_TESTS="$tests" \
  -DEPOCHCAST_WERROR="${EPOCHCAST_WERROR:-OFF}" > build.configure.log 2>&1 \
  || { cat build.configure.log; exit 1; }

jobs=$(nproc)
if ((all)); then
  echo "setup.sh: building everything in build/ (about 5 minutes on 2 cores from scratch," \
    "seconds when ccache has it)"
  cmake --build build -j"$jobs"
else
  echo "setup.sh: building the simulator and build/cli/epochcast (about 5 minutes on 2 cores" \
    "from scratch, seconds when ccache has it; tools/setup.sh --tests builds the rest)"
  cmake --build build -j"$jobs" --target epochcast
fi
