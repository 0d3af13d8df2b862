#!/usr/bin/env bash
# Regenerates the golden outputs in tests/golden/ from a built epochcast. Run it only when a
# change of output is intended, and commit the diff with the change that caused it. Paths under
# the source tree are written relative to it (tests/golden/compare.cmake reads them so).
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${EPOCHCAST:-build/cli/epochcast}
here=$PWD real=$(pwd -P)
while IFS='|' read -r name args; do
  name=$(echo "$name" | xargs)
  [[ -z "$name" || "$name" == \#* ]] && continue
  file=tests/golden/$name
  [[ $name == *.json ]] || file=$file.txt
  # shellcheck disable=SC2086
  env -u COLUMNS "$binary" $args | sed -e "s|$here/||g" -e "s|$real/||g" > "$file"
  echo "updated $file"
done < tests/golden/cases.txt
