#!/usr/bin/env bash
# Fails if any C++ source differs from what .clang-format asks for.
set -euo pipefail
cd "$(dirname "$0")/.."
formatter=$(command -v clang-format-14 || command -v clang-format)
git ls-files -co --exclude-standard '*.h' '*.cpp' '*.cu' | xargs "$formatter" --dry-run -Werror
