#!/usr/bin/env python3
"""Writes an epochcast model YAML for a PyTorch nn.Module (`epochcast import --torch` runs it).

The module is traced with torch.fx and its shapes propagated on one sample; every node becomes
one of the model format's layers, or is refused by name with its module path. Nothing is
trained and no GPU is used.

    torch_import.py --model torchvision.models.resnet50 --input-shape 3,224,224
    torch_import.py --model my_net.py:build --kwargs '{"classes": 10}' --input-shape 1,28,28

--model is a callable that returns the module: `package.module.function` (imported), or
`file.py:function` (the user's file, executed as Python: only what the user names on the
command line, never a name read from an input file).
"""

import argparse
import importlib
import importlib.util
import json
import operator
import os
import sys


class Refused(Exception):
    """A node the model format cannot express."""


def load_callable(spec):
    if ".py:" in spec:
        path, name = spec.rsplit(":", 1)
        module_spec = importlib.util.spec_from_file_location("epochcast_user_model", path)
        if module_spec is None:
            raise SystemExit(f"error: cannot load {path} as Python")
        module = importlib.util.module_from_spec(module_spec)
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        module_spec.loader.exec_module(module)
    else:
        module_name, _, name = spec.rpartition(".")
        if not module_name:
            raise SystemExit(f"error: --model {spec}: expected package.module.function or "
                             "file.py:function")
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise SystemExit(f"error: --model {spec}: cannot import {module_name} ({error})")
    if not hasattr(module, name):
        raise SystemExit(f"error: --model {spec}: no '{name}' there")
    return getattr(module, name)


def pair(value):
    """A size that PyTorch allows as an int or a tuple, as the two entries the YAML takes."""
    if isinstance(value, int):
        return [value, value]
    values = list(value)
    if len(values) == 1:
        return values * 2
    return values


def flow(entries):
    return "{" + ", ".join(f"{key}: {value}" for key, value in entries) + "}"


def yaml_list(values):
    return "[" + ", ".join(str(v) for v in values) + "]"


def number(value):
    return repr(float(value))


class Importer:
    def __init__(self, torch, graph_module, sample_rank):
        self.torch = torch
        self.gm = graph_module
        self.modules = dict(graph_module.named_modules())
        self.sample_rank = sample_rank
        self.lines = []
        self.names = {}      # fx node -> the layer name holding its value
        self.used = set()    # layer names given so far
        self.previous = None  # the layer name of the last layer written
        self.refused = []
        self.shapes = {}     # layer name -> its output per sample, as PyTorch computed it

    # -- helpers ------------------------------------------------------------------------------
    def shape(self, node):
        meta = node.meta.get("tensor_meta")
        if meta is None or not hasattr(meta, "shape"):
            raise Refused("its output is not one tensor")
        return list(meta.shape)[1:]  # per sample

    def source_of(self, value):
        if not hasattr(value, "op"):
            raise Refused(f"takes a constant ({value!r}) where the model format joins outputs")
        if value.op == "get_attr":
            raise Refused(f"uses the learned tensor {value.target} in a way no layer expresses "
                          "(only a product with it, or a layer_norm's weight and bias)")
        if value not in self.names:
            raise Refused(f"reads '{value.name}', which no layer computes")
        return self.names[value]

    def name_for(self, node):
        base = node.target if node.op == "call_module" else node.name
        name = base if base not in self.used else node.name
        while name in self.used:
            name += "_"
        return name

    def emit(self, node, entries, inputs=None, name=None, reads=None):
        """Writes a layer computing `node` from `reads` (default: its first argument), or from
        several named `inputs` (add, mul, cat); `name` overrides the one node gives."""
        name = name or self.name_for(node)
        while name in self.used:
            name += "_"
        entries = [("type", entries[0])] + [("name", name)] + entries[1:]
        if inputs is not None:
            entries.append(("inputs", yaml_list(inputs)))
        else:
            source = self.source_of(node.args[0] if reads is None else reads)
            if source != self.previous:
                entries.append(("input", source))
        self.lines.append("  - " + flow(entries))
        self.shapes[name] = self.shape(node)
        self.used.add(name)
        self.names[node] = name
        self.previous = name

    def alias(self, node, value):
        """`node` is `value` as the model format sees it (a view, an identity)."""
        self.names[node] = self.source_of(value)

    # -- modules ------------------------------------------------------------------------------
    def module(self, node):
        nn = self.torch.nn
        m = self.modules[node.target]
        kind = type(m).__name__
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.ConvTranspose2d)):
            if m.padding_mode != "zeros":
                raise Refused(f"{kind} with padding_mode '{m.padding_mode}'")
            padding = m.padding
            if isinstance(padding, str):
                if padding == "valid":
                    padding = 0
                else:
                    span = [d * (k - 1) for k, d in zip(m.kernel_size, m.dilation)]
                    if any(s % 2 for s in span):
                        raise Refused(f"{kind} with padding='same' and an even window")
                    padding = tuple(s // 2 for s in span)
            one_d = isinstance(m, nn.Conv1d)
            sizes = (lambda v: yaml_list(list(v))) if not one_d else (lambda v: v[0])
            layer = "conv1d" if one_d else (
                "conv_transpose2d" if isinstance(m, nn.ConvTranspose2d) else "conv2d")
            entries = [layer, ("out_channels", m.out_channels), ("kernel", sizes(m.kernel_size)),
                       ("stride", sizes(m.stride)),
                       ("padding", sizes(padding if not isinstance(padding, int)
                                         else (padding,) * len(m.kernel_size))),
                       ("dilation", sizes(m.dilation)), ("groups", m.groups),
                       ("bias", str(m.bias is not None).lower())]
            if layer == "conv_transpose2d":
                entries.insert(5, ("output_padding", sizes(m.output_padding)))
            return self.emit(node, entries)
        if isinstance(m, nn.Linear):
            return self.emit(node, ["linear", ("out_features", m.out_features),
                                    ("bias", str(m.bias is not None).lower())])
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            if not m.affine or not m.track_running_stats:
                raise Refused(f"{kind} without affine parameters or running statistics")
            layer = "batchnorm2d" if isinstance(m, nn.BatchNorm2d) else "batchnorm1d"
            return self.emit(node, [layer, ("eps", number(m.eps))])
        if isinstance(m, nn.LayerNorm):
            if len(m.normalized_shape) != 1 or not m.elementwise_affine:
                raise Refused("LayerNorm over more than the last dimension, or without weights")
            return self.emit(node, ["layernorm", ("eps", number(m.eps))])
        simple = {nn.ReLU: "relu", nn.ReLU6: "relu6", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh",
                  nn.SiLU: "silu", nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid"}
        for cls, layer in simple.items():
            if type(m) is cls:
                return self.emit(node, [layer])
        if isinstance(m, nn.GELU):
            extra = [("approximate", "tanh")] if getattr(m, "approximate", "none") == "tanh" else []
            return self.emit(node, ["gelu"] + extra)
        if isinstance(m, nn.Softmax):
            return self.softmax(node, m.dim)
        if isinstance(m, nn.Identity):
            return self.alias(node, node.args[0])
        if isinstance(m, nn.Dropout):
            return self.emit(node, ["dropout", ("p", number(m.p))])
        if isinstance(m, nn.Flatten):
            return self.flatten(node, m.start_dim, m.end_dim)
        if isinstance(m, (nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool2d)):
            if isinstance(m, nn.AvgPool2d) and (not m.count_include_pad or m.divisor_override):
                raise Refused("AvgPool2d without count_include_pad or with a divisor_override")
            if not isinstance(m, nn.AvgPool2d) and m.dilation not in (1, (1, 1), (1,)):
                raise Refused(f"{kind} with dilation")
            layer = {nn.MaxPool1d: "maxpool1d", nn.MaxPool2d: "maxpool2d",
                     nn.AvgPool2d: "avgpool2d"}[type(m)]
            sizes = (lambda v: v if isinstance(v, int) else v[0]) if layer == "maxpool1d" else (
                lambda v: yaml_list(pair(v)))
            extra = [("ceil_mode", "true")] if m.ceil_mode else []
            return self.emit(node, [layer, ("kernel", sizes(m.kernel_size)),
                                    ("stride", sizes(m.stride)), ("padding", sizes(m.padding))]
                             + extra)
        if isinstance(m, nn.AdaptiveAvgPool2d):
            return self.adaptive_pool(node, m.output_size)
        if isinstance(m, nn.Embedding):
            return self.emit(node, ["embedding", ("num_embeddings", m.num_embeddings),
                                    ("embedding_dim", m.embedding_dim)])
        if kind == "StochasticDepth":  # torchvision.ops.StochasticDepth
            return self.stochastic_depth(node, m.p, m.mode)
        raise Refused(f"{type(m).__module__}.{kind} has no layer in the model format")

    # -- shared rules -------------------------------------------------------------------------
    def softmax(self, node, dim):
        rank = self.sample_rank_of(node.args[0])
        if dim not in (-1, rank):
            raise Refused("softmax over another dimension than the last")
        return self.emit(node, ["softmax"])

    def sample_rank_of(self, value):
        return len(self.shape(value))

    def flatten(self, node, start, end):
        rank = self.sample_rank_of(node.args[0]) + 1
        if start == 1 and end in (-1, rank - 1):
            return self.emit(node, ["flatten"])
        return self.reshape(node)

    def reshape(self, node):
        shape = self.shape(node)
        if shape == self.shape(node.args[0]):
            return self.alias(node, node.args[0])
        return self.emit(node, ["reshape", ("shape", yaml_list(shape))])

    def adaptive_pool(self, node, size):
        sizes = pair(size)
        if None in sizes:
            raise Refused("adaptive pooling that keeps a dimension (None)")
        return self.emit(node, ["adaptive_avgpool2d", ("output_size", yaml_list(sizes))])

    def stochastic_depth(self, node, p, mode):
        if mode != "row":
            raise Refused("stochastic depth in 'batch' mode")
        return self.emit(node, ["stochastic_depth", ("p", number(p))])

    def learned(self, value):
        """The tensor a get_attr node reads (a parameter used by a function), else None."""
        if not hasattr(value, "op") or value.op != "get_attr":
            return None
        tensor = self.gm
        for part in value.target.split("."):
            tensor = getattr(tensor, part)
        return tensor

    def join(self, node, layer):
        a, b = node.args[:2]
        if not (hasattr(a, "op") and hasattr(b, "op")):
            raise Refused(f"{layer} with a constant operand")
        for param, other in ((a, b), (b, a)):
            tensor = self.learned(param)
            if tensor is None:
                continue
            if layer != "mul" or not isinstance(tensor, self.torch.nn.Parameter):
                raise Refused(f"{layer} with the tensor {param.target}")
            if tensor.dim() > len(self.shape(node)):
                raise Refused(f"{param.target} has more dimensions than a sample")
            # A learned scale (ConvNeXt's layer_scale), named after its tensor.
            return self.emit(node, ["scale", ("shape", yaml_list(list(tensor.shape)))],
                             name=param.target, reads=other)
        return self.emit(node, [layer], inputs=[self.source_of(a), self.source_of(b)])

    # -- functions and methods ----------------------------------------------------------------
    def function(self, node):
        torch, F = self.torch, self.torch.nn.functional
        f = node.target
        name = getattr(f, "__name__", str(f))
        kwargs = node.kwargs
        if f in (operator.add, torch.add, operator.iadd):
            return self.join(node, "add")
        if f in (operator.mul, torch.mul, operator.imul):
            return self.join(node, "mul")
        if f is torch.flatten:
            return self.flatten(node, node.args[1] if len(node.args) > 1 else
                                kwargs.get("start_dim", 0), kwargs.get("end_dim", -1))
        if f is torch.cat:
            parts = node.args[0]
            if len(parts) == 1:  # a copy of its one input (DenseNet's first layer)
                return self.alias(node, parts[0])
            dim = node.args[1] if len(node.args) > 1 else kwargs.get("dim", 0)
            rank = self.sample_rank_of(parts[0]) + 1
            dim = dim + rank if dim < 0 else dim
            if dim == 0:
                raise Refused("cat along the batch")
            return self.emit(node, ["concat", ("dim", dim - 1)],
                             inputs=[self.source_of(p) for p in parts])
        simple = {F.relu: "relu", torch.relu: "relu", F.relu6: "relu6", torch.sigmoid: "sigmoid",
                  F.sigmoid: "sigmoid", torch.tanh: "tanh", F.silu: "silu",
                  F.hardswish: "hardswish", F.hardsigmoid: "hardsigmoid"}
        if f in simple:
            return self.emit(node, [simple[f]])
        if f is F.gelu:
            extra = [("approximate", "tanh")] if kwargs.get("approximate") == "tanh" else []
            return self.emit(node, ["gelu"] + extra)
        if f is F.adaptive_avg_pool2d:
            return self.adaptive_pool(node, node.args[1] if len(node.args) > 1
                                      else kwargs["output_size"])
        if f is F.dropout:
            p = node.args[1] if len(node.args) > 1 else kwargs.get("p", 0.5)
            return self.emit(node, ["dropout", ("p", number(p))])
        if name == "stochastic_depth":  # torchvision.ops.stochastic_depth
            args = list(node.args[1:]) + [None, None]
            p = kwargs.get("p", args[0])
            mode = kwargs.get("mode", args[1])
            return self.stochastic_depth(node, p, mode)
        if f is torch.softmax or f is F.softmax:
            return self.softmax(node, node.args[1] if len(node.args) > 1 else kwargs.get("dim"))
        if f is F.layer_norm:
            return self.layer_norm(node)
        if f is torch.reshape:
            return self.reshape(node)
        if f is torch.transpose or f is torch.permute:
            return self.permutation(node)
        raise Refused(f"the function {getattr(f, '__module__', '')}.{name}")

    def layer_norm(self, node):
        """F.layer_norm with learned weight and bias over the last dimension (LayerNorm2d)."""
        args = list(node.args) + [None] * 5
        shape, weight, bias = args[1], node.kwargs.get("weight", args[2]), node.kwargs.get(
            "bias", args[3])
        eps = node.kwargs.get("eps", args[4] if args[4] is not None else 1e-5)
        last = self.shape(node.args[0])[-1]
        w, b = self.learned(weight), self.learned(bias)
        if list(shape) != [last] or w is None or b is None:
            raise Refused("layer_norm over more than the last dimension, or without learned "
                          "weight and bias")
        name = weight.target.rsplit(".", 1)[0] if "." in weight.target else weight.target
        return self.emit(node, ["layernorm", ("eps", number(eps))], name=name)

    def permutation(self, node):
        before, after = self.shape(node.args[0]), self.shape(node)
        args = node.args[1:]
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if len(args) == 2 and node.target in ("transpose", self.torch.transpose):
            a, b = (d + len(before) + 1 if d < 0 else d for d in args)
            if 0 in (a, b):
                raise Refused("a transpose that moves the batch")
            return self.emit(node, ["transpose", ("dims", yaml_list([a - 1, b - 1]))])
        dims = [d + len(before) + 1 if d < 0 else d for d in args]
        if not dims or dims[0] != 0:
            raise Refused("a permute that moves the batch")
        if before == after and dims == sorted(dims):
            return self.alias(node, node.args[0])
        return self.emit(node, ["permute", ("dims", yaml_list([d - 1 for d in dims[1:]]))])

    def method(self, node):
        m = node.target
        if m in ("view", "reshape", "flatten") and m != "flatten":
            return self.reshape(node)
        if m == "flatten":
            args = node.args[1:]
            return self.flatten(node, args[0] if args else node.kwargs.get("start_dim", 0),
                                args[1] if len(args) > 1 else node.kwargs.get("end_dim", -1))
        if m in ("contiguous", "clone"):
            return self.alias(node, node.args[0])
        if m in ("permute", "transpose"):
            return self.permutation(node)
        if m in ("size", "dim"):
            return None  # a shape read for a view: the view's own output shape is used instead
        if m in ("add", "add_"):
            return self.join(node, "add")
        if m in ("mul", "mul_"):
            return self.join(node, "mul")
        if m in ("relu", "relu_", "sigmoid", "tanh"):
            return self.emit(node, [m.rstrip("_")])
        raise Refused(f"the tensor method .{m}()")

    def run(self):
        for node in self.gm.graph.nodes:
            try:
                if node.op == "placeholder":  # fx's name for the graph's input
                    if self.names:
                        raise Refused("a second input (the format takes one)")
                    self.names[node] = "input"
                    self.previous = "input"
                elif node.op == "call_module":
                    self.module(node)
                elif node.op == "call_function":
                    if node.target is getattr and node.args[1] == "shape":
                        continue
                    if node.target is operator.getitem and not node.meta.get("tensor_meta"):
                        continue  # an entry of a shape
                    self.function(node)
                elif node.op == "call_method":
                    self.method(node)
                elif node.op == "get_attr":
                    continue  # a learned tensor: the function that uses it says how
                elif node.op == "output":
                    result = node.args[0]
                    if not hasattr(result, "op"):
                        raise Refused("returns several values (the format has one output)")
                    if self.names.get(result) != self.previous:
                        raise Refused("returns a value that is not its last layer's")
            except Refused as why:
                path = node.target if node.op == "call_module" else node.name
                self.refused.append(f"{path} ({node.op}): {why}")
                self.names.setdefault(node, node.name)
                self.previous = self.names[node]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True,
                        help="package.module.function or file.py:function returning the module")
    parser.add_argument("--kwargs", default="{}", help="constructor arguments, as JSON")
    parser.add_argument("--input-shape", required=True,
                        help="one sample's shape, comma-separated (3,224,224)")
    parser.add_argument("--input-dtype", default="float32", choices=["float32", "int64"])
    parser.add_argument("--vocabulary", type=int, default=2,
                        help="token ids drawn below this for an int64 input's shape pass")
    parser.add_argument("--name", help="the model's name (default: the callable's)")
    parser.add_argument("--output", "-o", help="write here instead of standard output")
    args = parser.parse_args()

    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    try:
        shape = [int(s) for s in args.input_shape.split(",")]
        if not shape or min(shape) < 1:
            raise ValueError
    except ValueError:
        raise SystemExit(f"error: --input-shape {args.input_shape}: expected positive sizes "
                         "separated by commas, such as 3,224,224")
    try:
        kwargs = json.loads(args.kwargs)
        if not isinstance(kwargs, dict):
            raise ValueError
    except ValueError:
        raise SystemExit(f"error: --kwargs {args.kwargs}: expected a JSON object")

    build = load_callable(args.model)
    torch.manual_seed(0)
    model = None
    meta = False
    if int(torch.__version__.split(".")[0]) >= 2:
        # PyTorch 2 builds on the meta device: shapes without weights, whatever the model's size.
        try:
            with torch.device("meta"):
                model = build(**kwargs)
            meta = True
        except Exception:
            model = None  # a constructor that computes with its weights: build it for real
    if model is None:
        try:
            model = build(**kwargs)
        except Exception as error:
            raise SystemExit(f"error: --model {args.model}: building it raised "
                             f"{type(error).__name__}: {error}")
    if not isinstance(model, torch.nn.Module):
        raise SystemExit(f"error: --model {args.model} returned {type(model).__name__}, "
                         "not an nn.Module")
    model.train()
    try:
        traced = torch.fx.symbolic_trace(model)
    except Exception as error:  # fx refuses data-dependent control flow, among others
        raise SystemExit(f"error: torch.fx cannot trace {args.model}: {error}")
    device = "meta" if meta else "cpu"
    if args.input_dtype == "int64":
        sample = torch.randint(0, args.vocabulary, [1] + shape, device=device)
    else:
        sample = torch.randn([1] + shape, device=device)
    try:
        with torch.no_grad():
            ShapeProp(traced).propagate(sample)
    except Exception as error:
        raise SystemExit(f"error: --model {args.model} on a sample of shape {shape}: "
                         f"{type(error).__name__}: {error}")

    importer = Importer(torch, traced, len(shape))
    importer.run()
    if importer.refused:
        sys.stderr.write(f"error: {args.model}: {len(importer.refused)} node(s) have no layer "
                         "in the model format:\n")
        for line in importer.refused:
            sys.stderr.write(f"  {line}\n")
        return 2

    params = sum(p.numel() for p in model.parameters())
    name = args.name or args.model.replace(":", ".").split("/")[-1].replace(".py.", ".")
    text = [
        f"# Imported by epochcast from {args.model}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})",
        f"# with torch.fx on PyTorch {torch.__version__}: {params:,} parameters as PyTorch counts",
        "# them. Edit freely; `epochcast inspect` checks it.",
        "kind: model",
        f"name: {json.dumps(name)}",
        f"description: {json.dumps(f'{args.model} as torch.fx traced it, {params} parameters')}",
        f"source: {json.dumps(f'epochcast import --torch {args.model} (torch.fx, PyTorch {torch.__version__})')}",
        "input:",
        f"  shape: {yaml_list(shape)}",
        f"  dtype: {args.input_dtype}",
        "layers:",
    ] + importer.lines
    out = "\n".join(text) + "\n"
    # The shapes PyTorch gave every layer, for `epochcast import` to check its analysis against
    # (it drops this line from the file it writes).
    out += f"# pytorch-shapes: {json.dumps(importer.shapes, separators=(',', ':'))}\n"
    if args.output:
        with open(args.output, "w") as f:
            f.write(out)
    else:
        sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
