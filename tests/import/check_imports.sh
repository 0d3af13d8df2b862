#!/usr/bin/env bash
# `epochcast import` end to end on Debian's PyTorch: a user's Python file is imported and
# predicts; torchvision's models import with PyTorch's own parameter counts (the importer's
# header states them, `epochcast inspect` counts the YAML; `import` itself checks every layer's
# shape against PyTorch's) and predict; a model the format cannot express is refused by node;
# every bundled Hugging Face config predicts.
# Usage: check_imports.sh SOURCE_DIR EPOCHCAST PYTHON OUTPUT_DIR
set -euo pipefail
source_dir=$1 epochcast=$2 python=$3 out=$4
export EPOCHCAST_PYTHON=$python
rm -rf "$out" && mkdir -p "$out"
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

# PyTorch's count (the header) against the YAML's (inspect).
check_counts() {
  local yaml=$1 torch ours
  torch=$(sed -n 's/^# with torch.fx on PyTorch .*: \([0-9,]*\) parameters.*/\1/p' "$yaml" | tr -d ,)
  ours=$("$epochcast" inspect "$yaml" | sed -n 's/^Total params: //p' | tr -d ,)
  if [[ -z $torch || $torch != "$ours" ]]; then
    fail "$yaml: PyTorch counts '$torch' parameters, the YAML '$ours'"
  else
    echo "$(basename "$yaml" .yaml): $ours parameters, as PyTorch counts them"
  fi
}

# A user's file, then a prediction with it.
"$epochcast" import --torch "$source_dir/tests/import/small_net.py:build" --kwargs '{"classes": 7}' \
  --input-shape 1,28,28 -o "$out/small.yaml"
check_counts "$out/small.yaml"
cat > "$out/scenario.yaml" <<SCENARIO
kind: scenario
name: imported-small-net
model: $out/small.yaml
hardware: dgx-a100
dataset: {name: fashion-mnist, train_samples: 60000, validation_samples: 10000, classes: 7}
training: {strategy: ddp, optimizer: sgd, precision: fp32, epochs: 1}
sweep: {gpus: [1, 2], batch: [64], batch_is: per_gpu}
SCENARIO
"$epochcast" predict "$out/scenario.yaml" > "$out/prediction.txt" || fail "the imported model does not predict"
grep -q "imported-small-net" "$out/prediction.txt" || fail "the prediction names no scenario"

# torchvision's models that torch.fx traces and the format expresses.
for model in resnet18 resnet50 resnet152 resnext50_32x4d wide_resnet50_2 mobilenet_v2 \
             mobilenet_v3_large mobilenet_v3_small efficientnet_b0 regnet_x_400mf regnet_y_400mf \
             densenet121 squeezenet1_0 vgg16 alexnet convnext_tiny; do
  "$epochcast" import --torch "torchvision.models.$model" --input-shape 3,224,224 \
    -o "$out/$model.yaml" 2> "$out/$model.log" || { fail "$model: $(tail -3 "$out/$model.log")"; continue; }
  check_counts "$out/$model.yaml"
  # ... and predicts: DDP on 1 and 8 A100s, 64 images a GPU.
  cat > "$out/$model-scenario.yaml" <<SCENARIO
kind: scenario
name: imported-$model
model: $out/$model.yaml
hardware: dgx-a100
dataset: {name: imagenet, train_samples: 51200, validation_samples: 0, classes: 1000}
training: {strategy: ddp, optimizer: sgd, precision: amp_bf16, epochs: 1}
sweep: {gpus: [1, 8], batch: [64], batch_is: per_gpu}
SCENARIO
  "$epochcast" predict "$out/$model-scenario.yaml" > "$out/$model-prediction.txt" 2>&1 ||
    fail "$model does not predict: $(tail -3 "$out/$model-prediction.txt")"
done

# Swin's shifted-window attention is a function the format has no layer for: refused, by node.
if "$epochcast" import --torch torchvision.models.swin_t --input-shape 3,224,224 \
     -o "$out/swin.yaml" 2> "$out/swin.log"; then
  fail "swin_t was imported"
elif ! grep -q "shifted_window_attention" "$out/swin.log"; then
  fail "swin_t's refusal names no node: $(cat "$out/swin.log")"
fi
[[ ! -e $out/swin.yaml ]] || fail "a refused import left a file behind"

# Every bundled Hugging Face config predicts, sharded across an 8-GPU box (a label per token
# from the vocabulary; ViT's two classes).
declare -A classes=([bert-base-uncased]=30522 [roberta-base]=50265 [gpt2]=50257
                    [gpt2-medium]=50257 [meta-llama-3-8b]=128256 [mistral-7b-v0.1]=32000
                    [qwen2-7b]=152064 [vit-base-patch16-224-in21k]=2)
for config in "$source_dir"/scenarios/models/huggingface/*.json; do
  name=$(basename "$config" .json)
  [[ -n ${classes[$name]:-} ]] || { fail "$name: no class count in this test"; continue; }
  cat > "$out/hf-$name.yaml" <<SCENARIO
kind: scenario
name: hf-$name
model: $config
hardware: dgx-h100
dataset: {name: corpus, train_samples: 8192, validation_samples: 0, classes: ${classes[$name]}}
training: {strategy: fsdp, optimizer: adamw, precision: amp_bf16, epochs: 1}
sweep: {gpus: [8], batch: [1], batch_is: per_gpu}
SCENARIO
  "$epochcast" predict "$out/hf-$name.yaml" > "$out/hf-$name.txt" 2>&1 || fail "$name does not predict: $(tail -3 "$out/hf-$name.txt")"
done

if ((failures)); then echo "$failures failure(s)"; exit 1; fi
echo "all imports hold"
