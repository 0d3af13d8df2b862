#!/usr/bin/env bash
# Runs every command line of README.md's examples (its second code block) as written, in a
# scratch folder where scenarios/, topologies/ and build/cli/ lead to the tree's and the build's,
# and where the files README calls your own exist: my.yaml (seed 001's linear model),
# my-model.yaml (a zoo model), big-sweep.yaml (a short sweep), my-ddp.yaml (a small ddp
# scenario) and topo.txt (a public nvidia-smi topo -m matrix). Each line must exit 0; the first
# that does not fails the test, with its output.
# Usage: check_readme_commands.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source=$(readlink -f "$1") build=$(readlink -f "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
ln -s "$source/scenarios" scenarios
ln -s "$source/topologies" topologies
mkdir -p build
ln -s "$build/cli" build/cli
cp "$source/scenarios/seed-001/linear.yaml" my.yaml
cp "$source/scenarios/models/mnist-cnn.yaml" my-model.yaml
cp "$source/tests/cli/nvidia_smi/dgx1-v100-msccl-tools.txt" topo.txt
sed 's/^  batch: .*/  batch: [10, 600]/' "$source/scenarios/seed-001/linear.yaml" > big-sweep.yaml
sed -e 's/^  strategy: .*/  strategy: ddp/' -e 's/^  train_samples: .*/  train_samples: 400/' \
    -e 's/^  gpus: .*/  gpus: [4]/' -e 's/^  batch: .*/  batch: [40]/' \
    "$source/scenarios/seed-001/linear.yaml" > my-ddp.yaml
# `import --torch` needs a Python with PyTorch: Debian's, where another python3 comes first.
if /usr/bin/python3 -c 'import torch' 2> /dev/null; then export EPOCHCAST_PYTHON=/usr/bin/python3; fi
# mpirun as root, with as many processes as asked on any machine, over shared memory.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
  OMPI_MCA_plm_rsh_agent=false OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1

mapfile -t lines < <(awk '/^```/{block++; next} block == 3' "$source/README.md")
ran=0
for line in "${lines[@]}"; do
  command=${line%%#*}                 # the comment after the command goes
  [[ -z ${command// /} ]] && continue
  echo "+ $command"
  if ! output=$(bash -c "$command" 2>&1); then
    echo "$output" | tail -30
    echo "check_readme_commands.sh: README.md's line failed: $command" >&2
    exit 1
  fi
  ran=$((ran + 1))
done
echo "ran $ran command lines of README.md"
((ran >= 15)) || { echo "check_readme_commands.sh: found only $ran lines" >&2; exit 1; }
