#!/usr/bin/env bash
# Builds the loader fuzzer (clang + libFuzzer, ASan + UBSan) in its own build tree and runs a
# bounded campaign seeded with every bundled YAML file. Exits non-zero on any finding.
#   FUZZ_SECONDS   campaign length (default 60)
#   FUZZ_BUILD_DIR build tree (default build-fuzz next to the sources)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
cxx=$(command -v clang++-14 || command -v clang++)

cmake -S "$src" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DEPOCHCAST_FUZZ=ON -DEPOCHCAST_BUILD_TESTS=OFF -DEPOCHCAST_BUILD_RUNTIME=OFF > "$build.log" 2>&1 \
  || { cat "$build.log"; exit 1; }
cmake --build "$build" --target fuzz_loaders -j"$(nproc)" >> "$build.log" 2>&1 \
  || { tail -50 "$build.log"; exit 1; }

seeds="$build/seeds"
corpus="$build/corpus"
rm -rf "$seeds"
mkdir -p "$seeds" "$corpus"
find "$src/scenarios" "$src/topologies" "$src/tests/fuzz/seeds" -name '*.yaml' \
  -exec cp -t "$seeds" {} + 2>/dev/null || true
cd "$build"
"$build/tests/fuzz/fuzz_loaders" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=512 \
  -max_len=8192 -print_final_stats=1 "$corpus" "$seeds"
