#!/usr/bin/env bash
# Installs what epochcast needs on Debian 12 (apt, as root; only what is missing), then
# configures and builds it in build/. EPOCHCAST_WERROR=ON makes warnings errors (CI).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config libyaml-cpp-dev catch2 libcli11-dev libfmt-dev
          nlohmann-json3-dev libbenchmark-dev clang-14 libfuzzer-14-dev clang-format gnuplot-nox
          libtorch-dev libopenblas0-pthread libopenmpi-dev openmpi-bin libceres-dev zlib1g-dev
          dataset-fashion-mnist)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DEPOCHCAST_WERROR="${EPOCHCAST_WERROR:-OFF}" > build.configure.log 2>&1 \
  || { cat build.configure.log; exit 1; }
cmake --build build -j"$(nproc)"
