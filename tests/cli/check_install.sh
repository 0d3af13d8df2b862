#!/usr/bin/env bash
# `cmake --install` lays out a prefix whose epochcast finds its data beside itself: installed
# into a fresh folder, then moved (the build's paths are nowhere in it), it names the installed
# data in --version, predicts a bundled scenario from a folder of its own, and its man page and
# bash completion are where they belong. The Debian package holds the same and runs unpacked.
# Usage: check_install.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

cmake --install "$build" --prefix "$work/installed" --component cli > "$work/install.log"
# Moved after installing: nothing may point back to where it was installed or built.
mv "$work/installed" "$work/moved"
prefix=$work/moved
epochcast=$prefix/bin/epochcast
[[ -x $epochcast ]] || { cat "$work/install.log"; fail "no $epochcast"; exit 1; }
for folder in topologies scenarios scenarios/models topologies/profiles schemas; do
  [[ -d $prefix/share/epochcast/$folder ]] || fail "no share/epochcast/$folder"
done
[[ -f $prefix/share/epochcast/schemas/scenario.schema.json ]] || fail "no scenario.schema.json"
[[ -f $prefix/share/doc/epochcast/README.md ]] || fail "no share/doc/epochcast/README.md"
[[ -f $prefix/share/doc/epochcast/guide.md ]] || fail "no share/doc/epochcast/guide.md"
[[ -f $prefix/share/bash-completion/completions/epochcast ]] || fail "no bash completion"
if command -v help2man > /dev/null; then
  [[ -f $prefix/share/man/man1/epochcast.1 ]] || fail "no man page"
  grep -q 'epochcast predict' "$prefix/share/man/man1/epochcast.1" \
    || fail "the man page has no section for epochcast predict"
fi

mkdir "$work/elsewhere"
cd "$work/elsewhere"
version=$(env -u EPOCHCAST_DATA_DIR "$epochcast" --version)
echo "$version"
grep -qE '^epochcast [0-9]+\.[0-9]+\.[0-9]+ \(git [^)]+\)$' <<< "$(head -1 <<< "$version")" \
  || fail "--version's first line is not 'epochcast X.Y.Z (git REVISION)'"
grep -qxF "data: $prefix/share/epochcast" <<< "$version" \
  || fail "--version does not name the installed data ($prefix/share/epochcast)"
if ! env -u EPOCHCAST_DATA_DIR "$epochcast" predict seed-001/linear > predict.txt 2>&1; then
  cat predict.txt
  fail "the installed epochcast cannot predict seed-001/linear"
fi
grep -q "GTX 1080 Ti" predict.txt || fail "the prediction does not name the scenario's GPUs"

# A binary without its data says what is missing and how to point at it.
cp "$epochcast" "$work/alone"
if env -u EPOCHCAST_DATA_DIR "$work/alone" predict seed-001/linear > alone.txt 2>&1; then
  fail "a binary with no data beside it predicted a bundled scenario"
fi
grep -q "EPOCHCAST_DATA_DIR" alone.txt || { cat alone.txt; fail "no hint at EPOCHCAST_DATA_DIR"; }
EPOCHCAST_DATA_DIR=$prefix/share/epochcast "$work/alone" predict seed-001/linear > /dev/null \
  || fail "EPOCHCAST_DATA_DIR does not lead a lone binary to the data"

# The Debian packages (CPack; dpkg-shlibdeps needs `file`): epochcast holds the binary, its data,
# man page and completion, depends on the libraries it links, and runs unpacked.
if ! command -v file > /dev/null || ! command -v dpkg-deb > /dev/null; then
  fail "cannot build the Debian packages without file and dpkg-deb (tools/setup.sh --tests installs them)"
else
  (cd "$work" && cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/packages") \
    > "$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack failed"; }
  deb=$(ls "$work"/packages/epochcast_*_*.deb 2> /dev/null | head -1)
  if [[ -z $deb ]]; then
    fail "cpack made no epochcast_*.deb"
  else
    listing=$(dpkg-deb -c "$deb")
    for path in ./usr/bin/epochcast ./usr/share/epochcast/scenarios/seed-001/linear.yaml \
        ./usr/share/epochcast/topologies/gpus.yaml ./usr/share/epochcast/schemas/scenario.schema.json \
        ./usr/share/bash-completion/completions/epochcast; do
      grep -q " $path\$" <<< "$listing" || fail "the package has no $path"
    done
    dpkg-deb -f "$deb" Depends | grep -q "libyaml-cpp" || fail "the package does not depend on yaml-cpp"
    dpkg-deb -x "$deb" "$work/unpacked"
    env -u EPOCHCAST_DATA_DIR "$work/unpacked/usr/bin/epochcast" predict \
      scenarios/seed-001/linear.yaml > unpacked.txt 2>&1 \
      || { cat unpacked.txt; fail "the packaged epochcast, unpacked, cannot predict"; }
  fi
fi

((failures == 0)) || exit 1
echo "the installed layout finds its data"
