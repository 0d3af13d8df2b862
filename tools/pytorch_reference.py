#!/usr/bin/env python3
"""The harness's yardstick: a scenario's model trained by a plain PyTorch eager Python loop.

`epochcast run` trains through LibTorch from C++; users train from Python. This script trains
the same model (built from the zoo's YAML), on synthetic data of the same shape made the same
way (each sample drawn and normalised on the host, stacked, pinned, copied asynchronously), with
the same optimizer, precision and loss read-back, at each batch size of the scenario's sweep, and
times every iteration with CUDA events as the harness does: whole iterations, and the step alone
(batches made beforehand). The loop's summary prints the two side by side.

    tools/pytorch_reference.py SCENARIO.yaml [--iterations N] [--warmup N] -o REFERENCE.json
        [--kernel-trace DIR]
    tools/pytorch_reference.py --compare MEASURED.json REFERENCE.json

With --kernel-trace, three more steps per batch size run under torch.profiler (CPU operators
with their shapes, CUDA kernels with their launch and GPU time), saved as
DIR/kernels-1gpu-batchB.json: the Chrome trace `epochcast calibrate` and `epochcast kernels`
read, with an "epochcast" object saying the precision and whether cuDNN could use TF32.

Needs PyTorch with CUDA (or --device cpu, for a dry run with tiny sizes), and PyYAML. One GPU:
strategy single, or ddp in a process group of one (DistributedDataParallel around the model, its
reducer's hooks, copies and all-reduces included, as the 1-GPU row of PyTorch's DDP benchmark;
training.ddp's bucket_cap_mib, gradient_as_bucket_view, broadcast_buffers, find_unused_parameters
and static_graph passed on). Models: built from the zoo's YAML where it holds only the
calibration models' layer types (conv1d/2d, linear, pooling, activations, dropout, flatten,
reshape); ResNet-50 and ViT-B/16 from torchvision, BERT-base and GPT-2 small from transformers
(eager attention, as the zoo's models run it), as users train them; anything else is refused by
name. `loader.source: synthetic_gpu` makes each batch size's batch once on the device;
`training.memory_format: channels_last` converts the model and its inputs.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def fail(message):
    print(f"pytorch_reference.py: {message}", file=sys.stderr)
    sys.exit(2)


def load_yaml(path):
    try:
        import yaml
    except ImportError:
        fail("needs PyYAML (python3 -m pip install pyyaml)")
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def model_file(name):
    path = os.path.join(ROOT, "scenarios/models", name + ".yaml")
    if not os.path.exists(path):
        fail(f"no model '{name}' in scenarios/models/")
    return path


def pair(value):
    return tuple(value) if isinstance(value, list) else value


def build_model(spec, torch):
    """nn.Sequential of the zoo model's layers; in_channels/in_features tracked by shape."""
    nn = torch.nn
    shape = list(spec["input"]["shape"])  # per sample
    layers = []
    for entry in spec["layers"]:
        layer = {"type": entry} if isinstance(entry, str) else dict(entry)
        kind = layer["type"]
        if kind in ("conv1d", "conv2d"):
            conv = nn.Conv1d if kind == "conv1d" else nn.Conv2d
            module = conv(shape[0], layer["out_channels"], pair(layer["kernel"]),
                          stride=pair(layer.get("stride", 1)),
                          padding=pair(layer.get("padding", 0)),
                          bias=layer.get("bias", True))
        elif kind == "linear":
            module = nn.Linear(shape[-1], layer["out_features"], bias=layer.get("bias", True))
        elif kind in ("maxpool1d", "maxpool2d", "avgpool1d", "avgpool2d"):
            pools = {"maxpool1d": nn.MaxPool1d, "maxpool2d": nn.MaxPool2d,
                     "avgpool1d": nn.AvgPool1d, "avgpool2d": nn.AvgPool2d}
            module = pools[kind](pair(layer["kernel"]), stride=pair(layer.get("stride")),
                                 padding=pair(layer.get("padding", 0)))
        elif kind == "relu":
            module = nn.ReLU()
        elif kind == "sigmoid":
            module = nn.Sigmoid()
        elif kind == "tanh":
            module = nn.Tanh()
        elif kind == "dropout":
            module = nn.Dropout(layer.get("p", 0.5))
        elif kind == "flatten":
            module = nn.Flatten()
        elif kind == "reshape":
            target = layer["shape"]
            module = Reshape(target, torch)
        else:
            fail(f"layer type '{kind}' is not supported here (only the calibration models')")
        layers.append(module)
        # The per-sample output shape, from a probe on the CPU (one sample, no gradients).
        with torch.no_grad():
            shape = list(module.eval()(torch.zeros([1] + shape)).shape[1:])
    return nn.Sequential(*layers)


def Reshape(target, torch):
    class _Reshape(torch.nn.Module):
        def forward(self, x):
            return x.reshape([x.shape[0]] + list(target))
    return _Reshape()


# The zoo's composite models as their libraries build them (what users train).
LIBRARY_MODELS = {"resnet-50": "torchvision.models.resnet50",
                  "vit-b-16": "torchvision.models.vit_b_16",
                  "bert-base": "transformers BertForSequenceClassification",
                  "gpt2-small": "transformers GPT2LMHeadModel"}


def library_model(name, classes, torch):
    """The zoo model `name` from torchvision or transformers, returning logits."""
    if name in ("resnet-50", "vit-b-16"):
        try:
            import torchvision
        except ImportError:
            fail(f"model {name} needs torchvision")
        build = (torchvision.models.resnet50 if name == "resnet-50"
                 else torchvision.models.vit_b_16)
        return build(weights=None, num_classes=classes)
    try:
        import transformers
    except ImportError:
        fail(f"model {name} needs transformers")
    if name == "bert-base":
        config = transformers.BertConfig(num_labels=classes)
        auto = transformers.AutoModelForSequenceClassification
    else:
        config = transformers.GPT2Config()
        auto = transformers.AutoModelForCausalLM
    try:  # eager attention, as the zoo's transformer_encoder runs it
        model = auto.from_config(config, attn_implementation="eager")
    except TypeError:  # transformers before 4.36
        model = auto.from_config(config)

    class Logits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(input_ids=x).logits
    return Logits(model)


def math_flags(precision, torch):
    """PyTorch's defaults for fp32 (cuDNN TF32 on, cuBLAS TF32 off), as the runtime sets them."""
    cublas, cudnn = {"fp32": (False, True), "tf32": (True, True),
                     "fp32_strict": (False, False)}.get(precision, (False, True))
    torch.backends.cuda.matmul.allow_tf32 = cublas
    torch.backends.cudnn.allow_tf32 = cudnn


KERNEL_TRACE_STEPS = 3  # as the harness's --kernel-trace (runtime/train/kernel_trace.h)


def write_kernel_trace(path, precision, torch, steps):
    """`steps()` under torch.profiler, its Chrome trace written whole to `path`."""
    from torch.profiler import ProfilerActivity, profile
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, record_shapes=True) as prof:
        steps()
        if cuda:
            torch.cuda.synchronize()
    temporary = path + ".partial"
    try:
        prof.export_chrome_trace(temporary)
        with open(temporary, encoding="utf-8") as f:
            trace = json.load(f)
        if isinstance(trace, list):  # a PyTorch without Kineto writes the events alone
            trace = {"traceEvents": trace}
        trace["epochcast"] = {"precision": precision,
                              "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32}
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(trace, f)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def measure(scenario_path, iterations, warmup, kernel_trace=None, device_name="cuda",
            batches=None):
    import torch
    if device_name == "cuda" and not torch.cuda.is_available():
        fail("needs a CUDA GPU (or --device cpu for a dry run)")
    scenario = load_yaml(scenario_path)
    training = scenario.get("training", {})
    strategy = training.get("strategy", "single")
    if strategy not in ("single", "ddp"):
        fail(f"training.strategy: {strategy} is not mirrored here (single, or ddp on one GPU)")
    if strategy == "ddp" and scenario.get("sweep", {}).get("gpus", [1]) != [1]:
        fail("training.strategy: ddp is mirrored on one GPU only (sweep.gpus: [1]); more need a "
             "process per GPU under a launcher")
    ddp_options = ddp_arguments(training.get("ddp") or {}) if strategy == "ddp" else None
    model_spec = load_yaml(model_file(scenario["model"]))
    dataset = scenario["dataset"]
    shape = dataset.get("sample_shape", model_spec["input"]["shape"])
    classes = dataset.get("classes", 10)
    precision = training.get("precision", "fp32")
    optimizer_name = training.get("optimizer", "sgd")
    sync_every_step = training.get("sync_every_step", True)
    # What the reference cannot mirror is refused rather than silently run another way.
    unsupported = {"framework": "pytorch-2", "gradient_accumulation": 1,
                   "optimizer_implementation": "auto"}
    for key, default in unsupported.items():
        if training.get(key, default) != default:
            fail(f"training.{key}: {training[key]} is not mirrored here (only {default})")
    channels_last = training.get("memory_format", "channels_first") == "channels_last"
    loader = scenario.get("loader") or {}
    on_device = loader.get("source", "host") == "synthetic_gpu"
    if loader.get("workers", 0) != 0:
        fail("loader.workers: only 0 (batches made in the training loop) is mirrored here")
    for key in ("normalize_on_gpu", "prefetch_to_gpu", "gpu_decode_us"):
        if loader.get(key):
            fail(f"loader.{key} is not mirrored here")
    pin = loader.get("pin_memory", False)
    torch.backends.cudnn.benchmark = training.get("cudnn_benchmark", False)
    math_flags(precision, torch)
    cuda = device_name == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    autocast_dtype = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}.get(precision)
    token_ids = model_spec["input"].get("dtype") == "int64"
    vocabulary = model_spec["layers"][0].get("num_embeddings", 2) if token_ids else 0
    result = {"scenario": scenario.get("name"), "torch": torch.__version__,
              "device": torch.cuda.get_device_name(0) if cuda else "cpu",
              "model": LIBRARY_MODELS.get(scenario["model"], "built from the zoo's layers"),
              "loader_source": "synthetic_gpu" if on_device else "host",
              "memory_format": "channels_last" if channels_last else "channels_first",
              "precision": precision,
              "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
              "cublas_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
              "optimizer": optimizer_name, "strategy": strategy, "points": []}
    if ddp_options is not None:
        result["ddp"] = ddp_options
        # Ended after the sweep; a failure ends the process, and the group with it.
        group_folder = start_process_group_of_one(cuda, torch)
    for batch in batches or scenario["sweep"]["batch"]:
        torch.manual_seed(1)
        if scenario["model"] in LIBRARY_MODELS:
            model = library_model(scenario["model"], classes, torch)
        else:
            model = build_model(model_spec, torch)
        model = model.to(device).train()
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
        parameters = list(model.parameters())
        # torch.optim's defaults: foreach on CUDA tensors (PyTorch 2), as the simulator costs.
        if optimizer_name == "adam":
            optimizer = torch.optim.Adam(parameters, lr=1e-3)
        elif optimizer_name == "adamw":
            optimizer = torch.optim.AdamW(parameters, lr=1e-3)
        elif optimizer_name == "momentum":
            optimizer = torch.optim.SGD(parameters, lr=1e-2, momentum=0.9)
        else:
            optimizer = torch.optim.SGD(parameters, lr=1e-2)
        if hasattr(torch.amp, "GradScaler"):  # torch.amp's from PyTorch 2.3
            scaler = torch.amp.GradScaler("cuda", enabled=precision == "amp_fp16")
        else:
            scaler = torch.cuda.amp.GradScaler(enabled=precision == "amp_fp16")
        loss_fn = torch.nn.CrossEntropyLoss()

        # One label per output row, as the harness draws them: a sequence model's output has
        # a row per token, the others one per sample.
        probe_dtype = torch.long if token_ids else torch.float32
        with torch.no_grad():
            out_shape = list(model.eval()(
                torch.zeros([1] + list(shape), device=device, dtype=probe_dtype)).shape)
        model.train()
        if ddp_options is not None:
            model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[0] if cuda else None, **ddp_options)
        rows = 1
        for d in out_shape[1:-1]:
            rows *= d
        labels = min(classes, out_shape[-1])

        def sample_batch(index):
            """The harness's synthetic loader (runtime/data/synthetic_loader.cpp), in Python:
            each sample from its own seeded generator, normalised on its own, then stacked and
            pinned, in the training thread (workers: 0)."""
            xs, ys = [], []
            for i in range(batch):
                g = torch.Generator().manual_seed(1000003 * index + i)
                if token_ids:
                    xs.append(torch.randint(0, vocabulary, list(shape), generator=g))
                else:
                    x = torch.randn(list(shape), generator=g) * 3.0 + 1.0
                    xs.append((x - x.mean()) / (x.std() + 1e-6))
                ys.append(torch.randint(0, labels, (rows,), generator=g))
            x, y = torch.stack(xs), torch.stack(ys).reshape(-1)
            if on_device:  # made once, on the device (loader.source synthetic_gpu)
                return x.to(device), y.to(device)
            return (x.pin_memory(), y.pin_memory()) if pin and cuda else (x, y)

        def step(host_batch):
            x = host_batch[0].to(device, non_blocking=pin)
            y = host_batch[1].to(device, non_blocking=pin)
            if channels_last and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.autocast(device.type, dtype=autocast_dtype or torch.bfloat16,
                                enabled=autocast_dtype is not None):
                logits = model(x)
            loss = loss_fn(logits.float().reshape(-1, logits.shape[-1]), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            if sync_every_step:
                loss.item()

        def timed(body):
            for i in range(warmup):
                body(i)
            if not cuda:  # a dry run: the host's clock
                times = []
                for i in range(iterations):
                    start = time.perf_counter()
                    body(warmup + i)
                    times.append(time.perf_counter() - start)
                return times
            torch.cuda.synchronize()
            events = []
            for i in range(iterations):
                start = torch.cuda.Event(enable_timing=True)
                stop = torch.cuda.Event(enable_timing=True)
                start.record()
                body(warmup + i)
                stop.record()
                events.append((start, stop))
            torch.cuda.synchronize()
            return [s.elapsed_time(e) / 1e3 for s, e in events]

        try:
            # The whole iteration, data included, as the harness times it; with batches made on
            # the device, the same batch every step.
            if on_device:
                made = sample_batch(0)
                samples = timed(lambda i: step(made))
            else:
                samples = timed(lambda i: step(sample_batch(i)))
            # The step alone: batches made beforehand (two, alternating), the copy included.
            ready = [sample_batch(0), sample_batch(1)]
            step_samples = timed(lambda i: step(ready[i % 2]))
            point = {"global_batch": batch, "status": "ok",
                     "median_s": statistics.median(samples),
                     "step_median_s": statistics.median(step_samples),
                     "samples_s": samples, "step_samples_s": step_samples}
            if kernel_trace:
                path = os.path.join(kernel_trace, f"kernels-1gpu-batch{batch}.json")

                def traced_steps():
                    for i in range(KERNEL_TRACE_STEPS):
                        step(ready[i % 2])
                write_kernel_trace(path, precision, torch, traced_steps)
                point["kernel_trace"] = path
            result["points"].append(point)
        except torch.cuda.OutOfMemoryError:
            result["points"].append({"global_batch": batch, "status": "oom"})
        del model, optimizer
        if cuda:
            torch.cuda.empty_cache()
    if ddp_options is not None:
        torch.distributed.destroy_process_group()
        group_folder.cleanup()
    return result


# DistributedDataParallel's arguments from the scenario's training.ddp, PyTorch's defaults where
# it says nothing. The first bucket's 1 MiB is PyTorch's constant
# (dist._DEFAULT_FIRST_BUCKET_BYTES), not an argument: another figure cannot be mirrored.
def ddp_arguments(ddp):
    if ddp.get("first_bucket_mib", 1) != 1:
        fail("training.ddp.first_bucket_mib: PyTorch's first bucket is 1 MiB, no argument of "
             "DistributedDataParallel changes it")
    # The range epochcast's scenario loader takes (core/spec/scenario_loader.cpp): a byte to
    # a million MiB.
    cap = ddp.get("bucket_cap_mib", 25)
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not 2**-20 <= cap <= 1e6:
        fail(f"training.ddp.bucket_cap_mib: {cap!r} is not a size from 1 B to 1e6 MiB")
    arguments = {"bucket_cap_mb": cap}
    for key, default in (("gradient_as_bucket_view", False), ("broadcast_buffers", True),
                         ("find_unused_parameters", False), ("static_graph", False)):
        value = ddp.get(key, default)
        if not isinstance(value, bool):
            fail(f"training.ddp.{key}: {value!r} is not true or false")
        arguments[key] = value
    return arguments


# A process group of one rank (NCCL on the GPU, Gloo for a CPU dry run) through a file store in a
# folder of its own: no port, no launcher. Returns the folder, removed once the group ends.
def start_process_group_of_one(cuda, torch):
    import tempfile
    folder = tempfile.TemporaryDirectory(prefix="pytorch-reference-")
    store = torch.distributed.FileStore(os.path.join(folder.name, "store"), 1)
    torch.distributed.init_process_group("nccl" if cuda else "gloo", store=store, rank=0,
                                         world_size=1)
    return folder


def compare(measured_path, reference_path):
    with open(measured_path, encoding="utf-8") as f:
        measured = json.load(f)
    with open(reference_path, encoding="utf-8") as f:
        reference = json.load(f)
    harness = {p["global_batch"]: p for p in measured.get("points", []) if p.get("status") == "ok"}
    print(f"\n{measured.get('scenario', '?')}: the harness (LibTorch from C++) against PyTorch "
          f"{reference.get('torch', '?')} from Python, same model, data and optimizer; median ms")
    print(f"{'batch':>7} {'harness':>9} {'Python':>9} {'diff':>8}   {'Python, step alone':>18}")
    diffs = []
    for p in reference["points"]:
        b = p["global_batch"]
        if p.get("status") != "ok" or b not in harness:
            continue
        iteration = harness[b]["iteration_s"]["median"]
        diffs.append(iteration / p["median_s"] - 1)
        line = f"{b:>7} {iteration * 1e3:>9.3f} {p['median_s'] * 1e3:>9.3f} {diffs[-1] * 100:>+7.1f}%"
        if "step_median_s" in p:  # batches made beforehand: what the loader costs Python
            line += f"   {p['step_median_s'] * 1e3:>18.3f}"
        print(line)
    if diffs:
        mean_abs = sum(abs(d) for d in diffs) / len(diffs) * 100
        print(f"mean |harness - Python| / Python: {mean_abs:.1f}% over {len(diffs)} batch sizes")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("-o", "--output")
    parser.add_argument("--compare", nargs=2, metavar=("MEASURED", "REFERENCE"))
    parser.add_argument("--kernel-trace", metavar="DIR",
                        help="also write each batch size's kernel trace (torch.profiler) to DIR")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: a dry run (host clock), to check a campaign before a GPU")
    parser.add_argument("--batch", type=int, action="append",
                        help="measure this batch size instead of the sweep's (repeatable)")
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare)
        return
    if not args.scenario or not args.output:
        fail("give a scenario and -o REFERENCE.json (or --compare MEASURED REFERENCE)")
    if args.kernel_trace and not os.path.isdir(args.kernel_trace):
        fail(f"--kernel-trace: '{args.kernel_trace}' is no directory")
    result = measure(args.scenario, args.iterations, max(args.warmup, 1), args.kernel_trace,
                     args.device, args.batch)
    temporary = args.output + ".partial"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    os.replace(temporary, args.output)
    print(f"PyTorch reference written to {args.output}")


if __name__ == "__main__":
    main()
