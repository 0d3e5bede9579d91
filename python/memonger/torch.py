"""memonger for PyTorch modules: the plan of a module's forward pass before it runs, and how it
compares with what eager PyTorch allocates.

    import memonger.torch as mt
    plan = mt.plan_module(model, (x,))            # exported in memory, planned
    report = mt.compare_eager(model, (x,))        # eager's measured peak beside our arena
    print(report)

The module is exported with torch.onnx.export into a buffer (no file) and loaded with
memonger.load; every other keyword goes to memonger.plan. Works with torch 1.13 (Debian 12's)
and newer.
"""
import copy
import inspect
import io
import warnings
import weakref

import memonger

__all__ = ["export_onnx", "to_float16", "load_module", "plan_module", "eager_memory",
           "compare_eager", "Comparison"]

# The opset the export asks for: 17 has LayerNormalization (torch 1.13 exports it from 17 on).
DEFAULT_OPSET = 17


def _torch():
    import torch
    return torch


def _as_tuple(example_inputs):
    torch = _torch()
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, (list, tuple)):
        return tuple(example_inputs)
    raise memonger.Error("example_inputs: a tensor or a tuple of tensors")


def _input_names(module, inputs):
    """The forward pass's parameter names, as export names its inputs for dynamic_axes."""
    try:
        parameters = [p for p in inspect.signature(module.forward).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        parameters = []
    names = [p.name for p in parameters[:len(inputs)]]
    names += [f"input_{i}" for i in range(len(names), len(inputs))]
    return names


def to_float16(onnx_bytes):
    """An ONNX model with every float32 tensor made float16: initializers, Constant and
    ConstantOfShape values, Casts to float, and the types of graph inputs, outputs and
    value_info, in subgraphs too. What a model exported in fp32 runs as in fp16 (PyTorch 1.13
    cannot trace fp16 matmuls on the CPU); every op keeps its arithmetic."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    model = onnx.load_from_string(onnx_bytes)
    FLOAT, FLOAT16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    # Inputs ONNX requires in float32 whatever the data's type: Resize's and Upsample's scales.
    keep = set()

    def find_kept(g):
        for node in g.node:
            slot = {"Resize": 2, "Upsample": 1}.get(node.op_type)
            if slot is not None and len(node.input) > slot and node.input[slot]:
                keep.add(node.input[slot])
            for a in node.attribute:
                for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    find_kept(sub)
    find_kept(model.graph)

    def tensor(t):
        if t.data_type != FLOAT or t.name in keep:
            return t
        half = numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name)
        t.CopyFrom(half)
        return t

    def types(values):
        for v in values:
            if v.name in keep:
                continue
            if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type == FLOAT:
                v.type.tensor_type.elem_type = FLOAT16

    def graph(g):
        for t in g.initializer:
            tensor(t)
        types(g.input)
        types(g.output)
        types(g.value_info)
        for node in g.node:
            kept = any(out in keep for out in node.output)
            for a in node.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    if not kept:
                        tensor(a.t)
                elif a.type == onnx.AttributeProto.GRAPH:
                    graph(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for sub in a.graphs:
                        graph(sub)
                elif node.op_type == "Cast" and a.name == "to" and a.i == FLOAT and not kept:
                    a.i = FLOAT16
    graph(model.graph)
    return model.SerializeToString()


def export_onnx(module, example_inputs, dynamic_axes=None, input_names=None, opset=DEFAULT_OPSET,
                dtype=None):
    """The module's forward pass as ONNX bytes (torch.onnx.export into a buffer, eval mode) and
    its input names; with dtype=torch.float16, exported as it is and made fp16 (to_float16)."""
    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise memonger.Error(f"module: a torch.nn.Module, got {type(module).__name__}")
    inputs = _as_tuple(example_inputs)
    names = list(input_names) if input_names is not None else _input_names(module, inputs)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes on constant folding, tracing
        torch.onnx.export(module, inputs, buffer, opset_version=opset, input_names=names,
                          dynamic_axes=dynamic_axes, do_constant_folding=True)
    if dtype is None or dtype == torch.float32:
        return buffer.getvalue(), names
    if dtype != torch.float16:
        raise memonger.Error(f"dtype {dtype}: torch.float16 or None")
    return to_float16(buffer.getvalue()), names


def _dims_of(dynamic_axes, names, inputs, dims):
    """Every symbol of `dynamic_axes` bound to the example's size unless `dims` binds it."""
    bound = dict(dims or {})
    for name, axes in (dynamic_axes or {}).items():
        if name not in names:
            continue
        tensor = inputs[names.index(name)]
        items = axes.items() if isinstance(axes, dict) else (
            (axis, f"{name}_dynamic_axes_{i + 1}") for i, axis in enumerate(axes))
        for axis, symbol in items:
            bound.setdefault(symbol, int(tensor.shape[axis]))
    return bound


def load_module(module, example_inputs, dynamic_axes=None, dims=None, opset=DEFAULT_OPSET):
    """The module as a memonger model, typed at the example's sizes (a symbol of
    `dynamic_axes` at its example size unless `dims` gives a value or a (low, high) range)."""
    inputs = _as_tuple(example_inputs)
    data, names = export_onnx(module, inputs, dynamic_axes, opset=opset)
    name = f"<{type(module).__name__}>.onnx"
    return memonger.load(data, dims=_dims_of(dynamic_axes, names, inputs, dims), name=name)


def plan_module(module, example_inputs, dynamic_axes=None, dims=None, **plan_kwargs):
    """memonger.plan of the module's forward pass (plan_kwargs as memonger.plan's)."""
    model = load_module(module, example_inputs, dynamic_axes, dims)
    return memonger.plan(model, **plan_kwargs)


def _memory_events(prof):
    """(time in us, bytes allocated (+) or freed (-), op) of a profile, in the order they
    happened."""
    events = []
    try:
        raw = prof.profiler.kineto_results.events()
    except AttributeError as e:
        raise memonger.Error(f"this torch's profiler keeps no memory events ({e}): "
                             "eager_memory(..., device='meta') counts without it") from None
    for e in raw:
        if e.name() != "[memory]":
            continue
        start = e.start_us() if hasattr(e, "start_us") else e.start_ns() / 1000.0
        events.append((float(start), int(e.nbytes())))
    events.sort(key=lambda t: t[0])  # stable: ties keep the order they were recorded in
    return events


def _op_spans(prof):
    """(start us, end us, name) of the top-level aten ops of a profile."""
    spans = []
    for e in prof.events():
        if not e.name.startswith("aten::") or e.cpu_parent is not None:
            continue
        start = e.time_range.start
        spans.append((float(start), float(e.time_range.end), e.name))
    spans.sort()
    return spans


def _storage_of(tensor):
    """The identity and bytes of a tensor's storage (views share it)."""
    if hasattr(tensor, "untyped_storage"):
        storage = tensor.untyped_storage()
    else:  # torch 1.13
        typed = tensor.storage()
        storage = typed._untyped() if hasattr(typed, "_untyped") else typed.untyped()
    return storage._cdata, storage.nbytes()


def _meta_count(module, inputs):
    """Eager PyTorch's allocations counted on the meta device: every aten op runs without data
    (a TorchDispatchMode sees each one), each output's storage is counted from the op that made
    it until the last tensor referring to it is gone (weak references), weights and inputs not
    at all. Fused paths that PyTorch takes only on real devices (MultiheadAttention's fast path
    on the CPU) and kernels' own workspaces (convolutions') are not what runs here: where a
    module has them the count is not eager's."""
    torch = _torch()
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Count(TorchDispatchMode):
        def __init__(self, before):
            super().__init__()
            self.before = before  # storages allocated before the pass (weights, inputs)
            self.storages = {}  # identity -> [bytes, tensors alive]
            self.held = self.peak = 0
            self.curve = []     # (op index, bytes held after it)

        def _release(self, key):
            entry = self.storages[key]
            entry[1] -= 1
            if entry[1] == 0:
                self.held -= entry[0]
                del self.storages[key]

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor):
                    continue
                key, nbytes = _storage_of(t)
                if key in self.before:
                    continue  # a view of a weight or an input
                if key not in self.storages:
                    self.storages[key] = [nbytes, 0]
                    self.held += nbytes
                    self.peak = max(self.peak, self.held)
                self.storages[key][1] += 1
                weakref.finalize(t, self._release, key)
            self.curve.append((len(self.curve), self.held))
            return out

    # A copy on the meta device (the copy is made where the module is, then moved: its
    # parameters' bytes once more for a moment).
    meta_module = copy.deepcopy(module).to("meta")
    meta_inputs = tuple(t.to("meta") if isinstance(t, torch.Tensor) else t for t in inputs)
    before = {_storage_of(t)[0] for t in list(meta_module.parameters()) +
              list(meta_module.buffers()) + [t for t in meta_inputs if isinstance(t, torch.Tensor)]}
    count = Count(before)
    with torch.no_grad():
        with count:
            outputs = meta_module(*meta_inputs)
        del outputs
    return {"device": "meta", "peak_bytes": int(count.peak), "curve": count.curve, "ops": []}


def eager_memory(module, example_inputs, device=None):
    """What eager PyTorch allocates during one forward pass without gradients: a dict with
    peak_bytes (the most held at once beyond what was allocated before the pass: weights and
    inputs are not counted), device, and on the CPU the curve (a list of (microseconds, bytes
    held)) and the top-level ops with their times, from torch.profiler's allocation events
    (profile_memory=True). On CUDA the peak is torch.cuda.max_memory_allocated's.
    device="meta" counts instead of running (_meta_count): any size, no memory, no kernels
    (fp16 on a CPU), where the module has no fused paths or workspaces of its own."""
    torch = _torch()
    inputs = _as_tuple(example_inputs)
    if device == "meta":
        return _meta_count(module, inputs)
    if device is not None:
        raise memonger.Error(f"device {device!r}: None (where the module is) or 'meta'")
    devices = {t.device.type for t in inputs if isinstance(t, torch.Tensor)}
    devices |= {p.device.type for p in module.parameters()}
    with torch.no_grad():
        module(*inputs)  # warm-up: lazily made buffers are not the pass's
        if "cuda" in devices:
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            outputs = module(*inputs)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            del outputs
            return {"device": "cuda", "peak_bytes": int(peak), "curve": [], "ops": []}
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            outputs = module(*inputs)
        del outputs
    held = peak = 0
    curve = []
    events = _memory_events(prof)
    origin = events[0][0] if events else 0.0
    for start, nbytes in events:
        held += nbytes
        peak = max(peak, held)
        curve.append((start - origin, held))
    ops = [(s - origin, e - origin, n) for s, e, n in _op_spans(prof)]
    return {"device": "cpu", "peak_bytes": int(peak), "curve": curve, "ops": ops}


class Comparison(dict):
    """compare_eager's answer, a dict: eager_peak_bytes, arena_bytes, lower_bound_bytes,
    input_bytes (the graph inputs' aligned bytes in the arena), ratio (eager peak / (arena -
    inputs): eager's peak leaves out the inputs, allocated before the pass), device, model,
    eager_curve and eager_ops (eager_memory's), plan. Prints as a short table."""

    def __str__(self):
        def mib(b):
            return f"{b / 2**20:,.2f} MiB"
        lines = [f"{'model':<22}{self['model']}",
                 f"{'eager PyTorch peak':<22}{mib(self['eager_peak_bytes'])} "
                 f"({self['device']}, one forward pass, no_grad)",
                 f"{'memonger arena':<22}{mib(self['arena_bytes'])} "
                 f"({mib(self['arena_bytes'] - self['input_bytes'])} without the inputs)",
                 f"{'lower bound':<22}{mib(self['lower_bound_bytes'])}",
                 f"{'eager / arena':<22}{self['ratio']:.2f}x (both without the inputs)"]
        return "\n".join(lines)

    def html(self):
        """Our plan's page with eager PyTorch's bytes over the same pass drawn beside ours: its
        time stretched over our steps, the inputs added (our live bytes hold them)."""
        curve = self["eager_curve"]
        if not curve:
            return self["plan"].html()
        end = curve[-1][0] or 1.0
        inputs = self["input_bytes"]
        points = [(t / end, b + inputs) for t, b in curve]
        return self["plan"].html(measured=[(f"eager PyTorch ({self['device']}) + the inputs",
                                            points)])


def compare_eager(module, example_inputs, dynamic_axes=None, dims=None, **plan_kwargs):
    """Our plan of the module's forward pass beside eager PyTorch's measured peak for the same
    inputs (eager_memory). The ratio leaves the inputs out of both: the arena holds them for the
    whole pass, eager allocated them before it (as the model zoo's memory table measures).
    Eager's peak includes what its kernels allocate for themselves (a convolution's workspace);
    the arena is what the plan places, and a runtime's kernel scratch comes on top of it (the
    library's CPU convolution's im2col buffer does)."""
    inputs = _as_tuple(example_inputs)
    # One inference pass against one inference pass, the inputs apart from the weights.
    for key in ("mode", "recompute", "plan_static", "recycle_inputs"):
        if plan_kwargs.get(key) not in (None, False, "inference", "none"):
            raise memonger.Error(f"compare_eager compares one inference pass: no {key}")
    plan = plan_module(module, inputs, dynamic_axes, dims, **plan_kwargs)
    if isinstance(plan, memonger.SymbolicPlan):
        raise memonger.Error("compare_eager runs the module at its example's sizes: no ranges")
    eager = eager_memory(module, inputs)
    arena = plan.arena_bytes
    align = plan.alignment
    input_bytes = sum(-(-v["size"] // align) * align for v in plan.values
                      if v["role"] == "input" and v["offset"] >= 0)
    computed = arena - input_bytes
    report = Comparison(
        model=type(module).__name__, device=eager["device"],
        eager_peak_bytes=eager["peak_bytes"], arena_bytes=arena,
        lower_bound_bytes=plan.lower_bound_bytes, input_bytes=input_bytes,
        ratio=(eager["peak_bytes"] / computed) if computed > 0 else float("inf"),
        eager_curve=eager["curve"], eager_ops=eager["ops"], plan=plan)
    return report
