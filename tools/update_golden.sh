#!/usr/bin/env bash
# Regenerates the golden outputs in tests/golden/ from a built epochcast. Run it only when a
# change of output is intended, and commit the diff with the change that caused it.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${EPOCHCAST:-build/cli/epochcast}
while IFS='|' read -r name args; do
  name=$(echo "$name" | xargs)
  [[ -z "$name" || "$name" == \#* ]] && continue
  # shellcheck disable=SC2086
  env -u COLUMNS "$binary" $args > "tests/golden/$name.txt"
  echo "updated tests/golden/$name.txt"
done < tests/golden/cases.txt
