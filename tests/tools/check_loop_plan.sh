#!/usr/bin/env bash
# tools/calibration_loop.sh --dry-run against a lent GPU machine's limits (../.library/device:
# 10 minutes a command, 8 files back from $OUT): the plan a session runs there must fit, and
# one that cannot must be refused before any device time is spent.
set -uo pipefail
cd "$(dirname "$0")/../.."
loop=tools/calibration_loop.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

# The lent machine's command: a fresh build, the GPU tests, three scenarios, in 540 s.
plan=$("$loop" --dry-run --measure-only --build "$out/no-build" --deps .deps --timeout 540 \
  --out "$out/OUT" 2>&1) || fail "the lent machine's plan does not fit: $plan"
echo "$plan"
grep -q "^build: epochcast-run epochcast_cuda_tests in $out/no-build/ (to build" <<< "$plan" \
  || fail "it does not build exactly epochcast-run and the GPU tests"
grep -q "epochcast_cuda_tests" <<< "$plan" || fail "the GPU tests are not built"
grep -q "epochcast " <<< "$plan" && fail "a measuring machine builds the simulator"
measures=$(grep -c "^measure: " <<< "$plan")
((measures == 3)) || fail "expected the 3 calibration scenarios measured, got $measures"
files=$(sed -n 's/^into .*: \(.*\) (\([0-9]*\) files of the 8 .*/\2/p' <<< "$plan")
[[ -n $files ]] && ((files <= 8)) || fail "more than 8 files would land in \$OUT ($files)"
[[ -e $out/OUT || -e $out/no-build ]] && fail "a dry run created files"

# Too little time for the same plan: refused, with what to cut.
if short=$("$loop" --dry-run --measure-only --build "$out/no-build" --timeout 120 2>&1); then
  fail "a 120 s budget for a fresh build and three scenarios was accepted: $short"
fi
grep -q "does not fit" <<< "$short" || fail "the refusal does not say so: $short"

# Bad values are bad input (exit 2), not a plan.
"$loop" --dry-run --timeout soon > /dev/null 2>&1
(($? == 2)) || fail "--timeout soon was not refused with exit 2"
"$loop" --dry-run --no-measure --measure-only > /dev/null 2>&1
(($? == 2)) || fail "--no-measure with --measure-only was not refused with exit 2"
exit $((failures > 0))
