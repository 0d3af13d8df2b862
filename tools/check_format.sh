#!/usr/bin/env bash
# Fails if any C++ source differs from what .clang-format asks for.
set -euo pipefail
cd "$(dirname "$0")/.."
formatter=$(command -v clang-format-14 || command -v clang-format)
# The sources git knows (tracked or not ignored); outside a git checkout (an unpacked tarball),
# every source but the build trees'.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -co --exclude-standard '*.h' '*.cpp' '*.cu'
else
  find . \( -name 'build*' -o -name '.git' \) -prune -o \
    \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' \) -type f -print
fi | xargs "$formatter" --dry-run -Werror
