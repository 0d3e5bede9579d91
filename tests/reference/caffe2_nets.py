"""Caffe2-style nets for differential tests: a seeded generator, Caffe2's gradient builder for
the ops it uses, shape inference, and a protobuf text-format writer and parser.

Nets are the dicts of memonger_ref.py. A *case* is a dict:

    {"id", "kind": "training" | "inference", "net", "shapes": {blob: dims},
     "dtypes": {blob: "FLOAT" | "INT32"}, "input_shapes": {external input: dims},
     "losses", "param_grads", "namescope", "dont_share", "heads", "static"}

Training nets are written the way Caffe2's AddGradientOperators writes them (caffe2/python/
core.py, IR.GetBackwardPass; the notes' section 11): a forward part, then one ConstantFill(loss)
-> loss_autogen_grad (value 1.0) per loss, then the gradient ops of the forward ops in reverse
order, with gradient names I(i) + "_grad". A forward blob version read by several ops whose
gradient ops each produce a gradient keeps `X_grad` for the first gradient produced (the last
reader's) and renames the others `_X_grad_autosplit_<k>` (k from 0); a Sum(X_grad,
_X_grad_autosplit_0, ...) -> X_grad follows the gradient op of the first forward reader, on the
device of the first contribution. Sum is kept out of training nets: its gradient differs between
Caffe2 versions (no op, or a SumGradient op).
"""

import re

CPU = (0, 0)
GPU_TYPE = 1  # Caffe2's CUDA device_type


def op_device(op):
    return tuple(op.get("device", CPU))


# ---------------------------------------------------------------------------------------------
# Caffe2's gradient builder (IR.GetBackwardPass) for FC, Relu, Softmax, LabelCrossEntropy,
# AveragedLoss and the two device copies.


def _grad_defs(op, g_out):
    """GradientMakerBase subclasses: (gradient ops, gradient name per forward input or None).
    GI(i) = input i + "_grad"; GO(0) = `g_out`; device and args copied from the forward op."""
    x = op["input"]
    gi = [b + "_grad" for b in x]
    t = op["type"]
    if t == "FC":
        defs = [("FCGradient", [x[0], x[1], g_out], [gi[1], gi[2], gi[0]])]
        g_in = gi
    elif t in ("Relu", "Softmax"):
        defs = [(t + "Gradient", [op["output"][0], g_out], [gi[0]])]
        g_in = gi
    elif t == "LabelCrossEntropy":
        defs = [("LabelCrossEntropyGradient", [x[0], x[1], g_out], [gi[0]])]
        g_in = [gi[0], None]
    elif t == "AveragedLoss":
        defs = [("AveragedLossGradient", [x[0], g_out], [gi[0]])]
        g_in = gi
    elif t == "CopyGPUToCPU":
        defs = [("CopyCPUToGPU", [g_out], [gi[0]])]
        g_in = gi
    elif t == "CopyCPUToGPU":
        defs = [("CopyGPUToCPU", [g_out], [gi[0]])]
        g_in = gi
    else:
        raise ValueError("no gradient for %s in this generator" % t)
    ops = [{"type": ty, "input": list(i), "output": list(o), "device": op_device(op),
            "arg": dict(op.get("arg", {}))} for ty, i, o in defs]
    return ops, g_in


def gradient_ops(forward_ops, losses, fill_device=CPU):
    """The ops AddGradientOperators(losses) appends after `forward_ops` (module docstring). The
    loss gradients' ConstantFills run on `fill_device` (the device scope AddGradientOperators
    is called under; CPU 0 outside any)."""
    # SSA versions (IR.Play): an input reads the current version, an output bumps it.
    frontier = {}
    ssa = []
    usages = {}  # (name, version) -> forward op indices, one per input occurrence
    for idx, op in enumerate(forward_ops):
        in_v = {}
        for b in op["input"]:
            in_v[b] = frontier.setdefault(b, 0)
            usages.setdefault((b, in_v[b]), []).append(idx)
        for b in op["output"]:
            frontier[b] = frontier[b] + 1 if b in frontier else 0
        ssa.append((op, in_v))

    generators = {}  # (name, version) -> [(gradient op, output index)] in creation order
    input_to_grad = {}
    all_grad_ops = []
    for loss in losses:
        usages.setdefault((loss, frontier[loss]), []).append(len(forward_ops))
        fill = {"type": "ConstantFill", "input": [loss], "output": [loss + "_autogen_grad"],
                "device": tuple(fill_device), "arg": {"value": 1.0}}
        all_grad_ops.append(fill)
        input_to_grad[loss] = fill["output"][0]
        generators.setdefault((loss, frontier[loss]), []).append((fill, 0))

    for idx in reversed(range(len(forward_ops))):
        op, in_v = ssa[idx]
        g_output = [input_to_grad.get(b) for b in op["output"]]
        if any(g is not None for g in g_output):
            assert len(g_output) == 1
            grad_ops, g_input = _grad_defs(op, g_output[0])
            for gop in grad_ops:
                for k, out in enumerate(gop["output"]):
                    if out in g_input:
                        name = op["input"][g_input.index(out)]
                        generators.setdefault((name, in_v[name]), []).append((gop, k))
            for name, g in zip(op["input"], g_input):
                if g is not None or name not in input_to_grad or name in op["output"]:
                    input_to_grad[name] = g
            all_grad_ops += grad_ops
        # DoGradientAccumulation: at the first forward reader of a version read several times.
        sums = []
        for name in dict.fromkeys(op["input"]):
            key = (name, in_v[name])
            gens = generators.get(key, [])
            if len(usages[key]) <= 1 or usages[key][0] != idx or len(gens) < 2:
                continue
            first_op, first_k = gens[0]
            base = first_op["output"][first_k]
            inputs = [base]
            for n, (gop, k) in enumerate(gens[1:]):
                gop["output"][k] = "_%s_autosplit_%d" % (gop["output"][k], n)
                inputs.append(gop["output"][k])
            sums.append({"type": "Sum", "input": inputs, "output": [base],
                         "device": op_device(first_op), "arg": {}})
            input_to_grad[name] = base
        assert len(sums) <= 1, "two accumulations at one op: Caffe2 orders them by set()"
        all_grad_ops += sums
    return all_grad_ops


# ---------------------------------------------------------------------------------------------
# Shape inference for the ops of these nets


def op_output_shapes(op, shapes):
    """Dims of an op's outputs from its inputs' dims."""
    x = [shapes[b] for b in op["input"]]
    t = op["type"]
    if t == "FC":
        return [[x[0][0], x[1][0]]]
    if t in ("Relu", "Softmax", "Copy", "CopyGPUToCPU", "CopyCPUToGPU", "Sum", "ConstantFill",
             "Free", "Alias", "ReluGradient", "SoftmaxGradient", "LabelCrossEntropyGradient",
             "AveragedLossGradient"):
        return [list(x[0])]
    if t == "LabelCrossEntropy":
        return [[x[0][0]]]
    if t == "AveragedLoss":
        return [[]]
    if t == "FCGradient":
        return [list(x[1]), [x[1][0]], list(x[0])]
    raise ValueError("no shape rule for %s" % t)


def infer_shapes(net, input_shapes, input_dtypes=None):
    """Dims and dtypes of every blob from the external inputs' dims (dtype FLOAT unless
    `input_dtypes` says otherwise; op outputs are FLOAT). Returns (shapes, dtypes)."""
    shapes = {k: list(v) for k, v in input_shapes.items()}
    dtypes = {k: (input_dtypes or {}).get(k, "FLOAT") for k in input_shapes}
    for op in net["op"]:
        for b, dims in zip(op["output"], op_output_shapes(op, shapes)):
            shapes[b] = dims
            dtypes[b] = "FLOAT"
    return shapes, dtypes


# ---------------------------------------------------------------------------------------------
# Net construction


class _Builder:
    """Accumulates ops, external inputs (in order of first use, as core.Net registers them),
    shapes and dtypes."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.ops = []
        self.external_input = []
        self.shapes = {}
        self.dtypes = {}
        self.readers = {}  # blob -> readers of its latest version so far

    def name(self, base):
        return self.prefix + base

    def external(self, name, dims, dtype="FLOAT"):
        if name not in self.external_input:
            self.external_input.append(name)
            self.shapes[name] = list(dims)
            self.dtypes[name] = dtype
        return name

    def add(self, type_, inputs, outputs, device=CPU, arg=None):
        op = {"type": type_, "input": list(inputs), "output": list(outputs),
              "device": tuple(device), "arg": dict(arg or {})}
        self.ops.append(op)
        for b in inputs:
            self.readers[b] = self.readers.get(b, 0) + 1
        for b, dims in zip(outputs, op_output_shapes(op, self.shapes)):
            assert self.shapes.get(b, dims) == dims, "a second writer changes %s's shape" % b
            self.shapes[b] = dims
            self.readers[b] = 0
        return outputs[0]

    def fc(self, x, base, dout, device=CPU):
        """fc(in, out, din, dout) of memonger_test.py: FC(x, out_w, out_b) -> out."""
        out = self.name(base)
        din = self.shapes[x][1]
        w = self.external(out + "_w", [dout, din])
        b = self.external(out + "_b", [dout])
        return self.add("FC", [x, w, b], [out], device)

    def loss_head(self, x, suffix, label, device=CPU):
        """Softmax -> pred, LabelCrossEntropy(pred, label) -> xent, AveragedLoss -> loss."""
        pred = self.add("Softmax", [x], [self.name("pred" + suffix)], device)
        xent = self.add("LabelCrossEntropy", [pred, label], [self.name("xent" + suffix)],
                        device)
        return self.add("AveragedLoss", [xent], [self.name("loss" + suffix)], device)

    def finish(self, name, net_type="", external_output=(), backward_from=None,
               fill_device=CPU):
        ops = list(self.ops)
        if backward_from:
            ops += gradient_ops(self.ops, backward_from, fill_device)
        net = {"name": name, "type": net_type, "external_input": list(self.external_input),
               "external_output": list(external_output), "op": ops}
        inputs = {b: self.shapes[b] for b in self.external_input}
        shapes, dtypes = infer_shapes(net, inputs, {b: self.dtypes[b] for b in inputs})
        return net, shapes, dtypes


def _case(id_, kind, net, shapes, dtypes, **extra):
    case = {"id": id_, "kind": kind, "net": net, "shapes": shapes, "dtypes": dtypes,
            "input_shapes": {b: shapes[b] for b in net["external_input"]},
            "losses": [], "param_grads": [], "namescope": "", "dont_share": [],
            "heads": [], "static": []}
    case.update(extra)
    return case


def _param_grads(net):
    """Gradients of the FC weights and biases that have one (a dead-end FC has none)."""
    written = {b for op in net["op"] for b in op["output"]}
    return [b + "_grad" for b in net["external_input"]
            if b.endswith(("_w", "_b")) and b + "_grad" in written]


# The nets of memonger_test.py (section 11), used by the self-tests.


def mlp_case(prefix="", n_fc=3, batch=4, dims=(4, 4, 4, 4), namescope=None):
    """N1 (n_fc=3) and test 4 (n_fc=5): fc1..fcN, Relu fcN in place, Softmax -> pred,
    LabelCrossEntropy -> xent, AveragedLoss -> loss, gradients."""
    b = _Builder(prefix)
    x = b.external(b.name("data"), [batch, dims[0]])
    for k in range(1, n_fc + 1):
        x = b.fc(x, "fc%d" % k, dims[min(k, len(dims) - 1)])
    b.add("Relu", [x], [x])
    label = b.external(b.name("label"), [batch], "INT32")
    loss = b.loss_head(x, "", label)
    net, shapes, dtypes = b.finish("mlp", backward_from=[loss])
    return _case("mlp", "training", net, shapes, dtypes, losses=[loss],
                 param_grads=_param_grads(net),
                 namescope=prefix if namescope is None else namescope,
                 heads=[b.name("data")])


def mix_cpu_gpu_case():
    """Test 5: GPU fc1..fc4 (2 -> 2), CopyGPUToCPU fc4 -> fc4_cpu, CPU fc5_cpu..fc7_cpu,
    Relu in place, Softmax, LabelCrossEntropy, AveragedLoss, gradients."""
    gpu = (GPU_TYPE, 0)
    b = _Builder("")
    x = b.external("data", [4, 2])
    for k in range(1, 5):
        x = b.fc(x, "fc%d" % k, 2, gpu)
    x = b.add("CopyGPUToCPU", [x], ["fc4_cpu"], gpu)
    for k in range(5, 8):
        x = b.fc(x, "fc%d_cpu" % k, 2)
    b.add("Relu", [x], [x])
    label = b.external("label", [4], "INT32")
    loss = b.loss_head(x, "", label)
    net, shapes, dtypes = b.finish("mix_cpu_gpu", backward_from=[loss])
    return _case("mix_cpu_gpu", "training", net, shapes, dtypes, losses=[loss],
                 param_grads=_param_grads(net), heads=["data"])


def tree_case():
    """Test 6: fc1..fc5, Relu fc5, loss 1; fc6 = FC(fc5), Relu fc6, loss 2; both heads."""
    b = _Builder("name_x/")
    x = b.external(b.name("data"), [4, 4])
    for k in range(1, 6):
        x = b.fc(x, "fc%d" % k, 4)
    b.add("Relu", [x], [x])
    label = b.external(b.name("label"), [4], "INT32")
    loss1 = b.loss_head(x, "1", label)
    y = b.fc(x, "fc6", 4)
    b.add("Relu", [y], [y])
    loss2 = b.loss_head(y, "2", label)
    net, shapes, dtypes = b.finish("tree", backward_from=[loss1, loss2])
    return _case("tree", "training", net, shapes, dtypes, losses=[loss1, loss2],
                 param_grads=_param_grads(net), namescope="name_x",
                 dont_share=[b.name("fc6"), b.name("fc5"), b.name("fc1_w_grad")])


def daggy_case(harder=False):
    """Test 7 (forward_optim_tree_daggy) and, with harder=True, test 8."""
    b = _Builder("name_x/")
    data = b.external(b.name("data"), [4, 4])
    if harder:
        b.external(b.name("label"), [4], "INT32")
    x = b.fc(data, "fc1", 4)
    fc2 = b.fc(x, "fc2", 4)
    x = fc2
    for k in (3, 4, 5):
        x = b.fc(x, "fc%d" % k, 4)
    fc5 = x
    y = fc2
    for k in (3, 4, 5):
        y = b.fc(y, "fc%db" % k, 4)
    fc5sum = b.add("Sum", [fc5, y], [b.name("fc5sum")])
    if harder:
        relu1 = b.add("Relu", [fc5sum], [b.name("relu1")])
        label = b.name("label")
        loss1 = b.loss_head(relu1, "1", label)
    else:
        b.add("Relu", [fc5], [fc5sum])
        label = b.external(b.name("label"), [4], "INT32")
        loss1 = b.loss_head(fc5sum, "1", label)
    fc6 = b.fc(fc5, "fc6", 4)
    b.add("Relu", [fc6], [fc6])
    loss2 = b.loss_head(fc6, "2", label)
    net, shapes, dtypes = b.finish("daggy", net_type="dag")
    return _case("daggy", "inference", net, shapes, dtypes, losses=[loss1, loss2],
                 namescope="name_x/" if harder else "name_x", heads=[data])


# ---------------------------------------------------------------------------------------------
# Random nets

def _other_device(rng, device):
    return (GPU_TYPE, rng.randint(0, 1)) if device == CPU else CPU


def _copy_op(device_from, device_to):
    """The copy between CPU and a GPU, and the device it runs on (Caffe2 runs both copies under
    a GPU device option)."""
    if device_from == CPU:
        return "CopyCPUToGPU", device_to
    return "CopyGPUToCPU", device_from


def random_training_case(rng, id_, single_device=False):
    """A forward tree of FCs (forks: a blob read by several FCs; in-place or out-of-place
    Relus; dead ends with no gradient; sometimes a second device after a copy), one
    Softmax/LabelCrossEntropy/AveragedLoss head per chosen leaf, then Caffe2's gradient ops.
    With `single_device`, no copy: every op, the loss gradients' ConstantFills included, runs
    on the one device drawn (CPU 0 or a GPU)."""
    prefix = rng.choice(["", "", "name_x/", "gpu_0/"])
    b = _Builder(prefix)
    batch = rng.randint(1, 4)
    device = (GPU_TYPE, rng.randint(0, 1)) if rng.random() < 0.25 else CPU
    data = b.external(b.name("data"), [batch, rng.randint(1, 4)])
    n_fc = rng.randint(2, 8)
    switch_at = rng.randint(1, n_fc - 1) if rng.random() < 0.35 else None
    if single_device:
        switch_at = None
    first_device = device
    live = [data]  # blobs later ops may read (current device only)
    device_of = {data: device}
    for k in range(n_fc):
        if k == switch_at:
            src = live[-1]
            new_device = _other_device(rng, device)
            copy_type, copy_device = _copy_op(device, new_device)
            if b.readers.get(src, 0) == 0:  # a copied blob with other readers would mix
                dst = src + ("_cpu" if new_device == CPU else "_gpu")  # gradient devices
                b.add(copy_type, [src], [dst], copy_device)
                device = new_device
                live = [dst]
                device_of[dst] = device
        x = live[-1] if rng.random() < 0.65 else rng.choice(live)
        y = b.fc(x, "fc%d" % k, rng.randint(1, 4), device)
        r = rng.random()
        if r < 0.35:
            b.add("Relu", [y], [y], device)  # in place, before any other reader
        elif r < 0.5:
            y = b.add("Relu", [y], [b.name("relu%d" % k)], device)
        live.append(y)
        device_of[y] = device
    leaves = [blob for blob in device_of if blob != data and b.readers.get(blob, 0) == 0]
    rng.shuffle(leaves)
    n_losses = rng.randint(1, min(3, len(leaves)))
    label = b.external(b.name("label"), [batch], "INT32")
    losses = []
    for j, leaf in enumerate(sorted(leaves[:n_losses], key=list(device_of).index)):
        suffix = "" if n_losses == 1 else str(j + 1)
        losses.append(b.loss_head(leaf, suffix, label, device_of[leaf]))
    external_output = []
    if rng.random() < 0.3:
        external_output = list(losses)
    net_type = rng.choice(["", "", "simple", "dag"])
    net, shapes, dtypes = b.finish("train_%s" % id_, net_type, external_output, losses,
                                   first_device if single_device else CPU)
    if rng.random() < 0.2:
        external_output = external_output + [g for g in _param_grads(net)
                                             if rng.random() < 0.5]
        net["external_output"] = external_output
    namescope = prefix if rng.random() < 0.5 else prefix.rstrip("/")
    if rng.random() < 0.05:
        namescope = "other/"  # matches no blob: nothing is a gradient
    internal = [x for x in shapes if x not in net["external_input"]]
    dont_share = rng.sample(internal, rng.randint(1, 2)) if rng.random() < 0.3 else []
    static = rng.sample(internal, 1) if rng.random() < 0.2 else []
    return _case(id_, "training", net, shapes, dtypes, losses=losses,
                 param_grads=_param_grads(net), namescope=namescope,
                 dont_share=dont_share, heads=[data], static=static)


def random_inference_case(rng, id_, single_device=False):
    """A forward DAG: FC, Relu (in place or not), Sum joins (sometimes in place or of one blob
    twice), Copy, a second writer of a name (test 7's fc5sum), one or two data inputs, device
    switches through copies (none with `single_device`), and heads that may include a
    parameter (test 9)."""
    prefix = rng.choice(["", "name_x/"])
    b = _Builder(prefix)
    batch = rng.randint(1, 4)
    widths = [rng.randint(1, 4) for _ in range(rng.randint(1, 2))]
    device = (GPU_TYPE, 0) if rng.random() < 0.2 else CPU
    inputs = [b.external(b.name("data"), [batch, rng.choice(widths)])]
    if rng.random() < 0.25:
        inputs.append(b.external(b.name("data2"), [batch, rng.choice(widths)]))
    live = list(inputs)
    produced = {}  # op output -> device of its writer, for second writers
    n_ops = rng.randint(3, 14)
    switched = single_device  # a single-device net never switches
    k = -1
    while len(b.ops) < n_ops:  # some draws add no op
        k += 1
        r = rng.random()
        if not switched and k > 1 and r < 0.08:
            new_device = _other_device(rng, device)
            copy_type, copy_device = _copy_op(device, new_device)
            moved = rng.sample(live, min(len(live), rng.randint(1, 2)))
            live = [b.add(copy_type, [src], [b.name("copy%d_%d" % (k, j))], copy_device)
                    for j, src in enumerate(moved)]
            device = new_device
            produced.update((y, device) for y in live)
            switched = True
            continue
        x = live[-1] if rng.random() < 0.6 else rng.choice(live)
        out = None
        if r < 0.4:
            out = b.fc(x, "fc%d" % k, rng.choice(widths), device)
        elif r < 0.55:
            if x not in inputs:
                out = b.add("Relu", [x], [x], device)  # in place
        elif r < 0.65:
            out = b.add("Relu", [x], [b.name("relu%d" % k)], device)
        elif r < 0.85:
            partners = [y for y in live if y != x and b.shapes[y] == b.shapes[x]]
            ins = [x, x] if rng.random() < 0.15 or not partners else [x, rng.choice(partners)]
            if ins[0] not in inputs and rng.random() < 0.2:
                out = b.add("Sum", ins, [ins[0]], device)  # in place
            else:
                out = b.add("Sum", ins, [b.name("sum%d" % k)], device)
        elif r < 0.93:
            out = b.add("Copy", [x], [b.name("copy%d" % k)], device)
        else:
            targets = [y for y, d in produced.items()
                       if y != x and d == device and b.shapes[y] == b.shapes[x]]
            if targets:
                out = b.add("Relu", [x], [rng.choice(targets)], device)  # a second writer
        if out is not None:
            produced.setdefault(out, device)
            if out in live:
                live.remove(out)
            live.append(out)
    last = b.ops[-1]["output"][0]
    external_output = [last] if rng.random() < 0.5 and last not in inputs else []
    net_type = rng.choice(["", "simple", "dag", "dag"])
    net, shapes, dtypes = b.finish("infer_%s" % id_, net_type, external_output)
    heads = list(inputs)
    params = [p for p in net["external_input"] if p.endswith("_w")]
    r = rng.random()
    if r < 0.2 and params:
        heads = [rng.choice(params)] + heads
    elif r < 0.3 and len(heads) > 1:
        heads = heads[:1]
    internal = [x for x in shapes if x not in net["external_input"]]
    static = rng.sample(internal, 1) if internal and rng.random() < 0.2 else []
    namescope = rng.choice(["", prefix, prefix.rstrip("/")])
    return _case(id_, "inference", net, shapes, dtypes, heads=heads, namescope=namescope,
                 static=static)


def random_case(rng, id_, single_device=False):
    """A training case two times in three, else an inference case. With `single_device`, every
    op of the net runs on one device (the default mixes CPU and GPUs through copies). The
    default draws the same nets as before the switch existed."""
    if rng.random() < 2.0 / 3.0:
        return random_training_case(rng, id_, single_device)
    return random_inference_case(rng, id_, single_device)


# ---------------------------------------------------------------------------------------------
# Checks


def check_well_formed(case):
    """Raises AssertionError unless every op input is external or written earlier, the shapes
    are what shape inference gives, and every gradient name follows Caffe2's rules: outputs of
    gradient ops are X_grad for a blob X of the net, _X_grad_autosplit_k (k counting from 0 per
    X, each read by the Sum that writes X_grad), or loss_autogen_grad for a loss."""
    net = case["net"]
    written = set(net["external_input"])
    for i, op in enumerate(net["op"]):
        for b in op["input"]:
            assert b in written, "op %d (%s) reads %s before any write" % (i, op["type"], b)
        written.update(op["output"])
    shapes, _ = infer_shapes(net, case["input_shapes"])
    assert shapes == case["shapes"], "generator shapes differ from inferred shapes"
    forward = set()
    autosplits = {}
    sums = {}
    for op in net["op"]:
        is_grad = op["type"].endswith("Gradient") or op["type"] in (
            "ConstantFill", "CopyCPUToGPU", "CopyGPUToCPU", "Sum") and any(
            "_grad" in b for b in op["output"])
        if not is_grad:
            forward.update(op["input"])
            forward.update(op["output"])
            continue
        if op["type"] == "Sum":
            sums[op["output"][0]] = op["input"]
        for b in op["output"]:
            m = re.match(r"^_(.*_grad)_autosplit_(\d+)$", b)
            if m:
                autosplits.setdefault(m.group(1), []).append(int(m.group(2)))
            elif b.endswith("_autogen_grad"):
                assert b[:-len("_autogen_grad")] in case["losses"], b
            else:
                assert b.endswith("_grad") and b[:-len("_grad")] in forward, b
    for g, ks in autosplits.items():
        assert sorted(ks) == list(range(len(ks))), (g, ks)
        assert sums.get(g) == [g] + ["_%s_autosplit_%d" % (g, k) for k in range(len(ks))], g
    if case["kind"] == "training":
        assert all(g in written for g in case["param_grads"])
        assert all(loss in written for loss in case["losses"])


# ---------------------------------------------------------------------------------------------
# Protobuf text format (Caffe2's NetDef fields; the parser also accepts other layouts)


def _quote(s):
    out = []
    for ch in s.encode("utf-8"):
        c = chr(ch)
        if c in "\"\\":
            out.append("\\" + c)
        elif 32 <= ch < 127:
            out.append(c)
        else:
            out.append("\\%03o" % ch)
    return '"' + "".join(out) + '"'


def _arg_text(name, value):
    if isinstance(value, bool) or isinstance(value, int):
        body = "i: %d" % int(value)
    elif isinstance(value, float):
        body = "f: %r" % value
    elif isinstance(value, str):
        body = "s: " + _quote(value)
    elif all(isinstance(v, float) for v in value):
        body = " ".join("floats: %r" % v for v in value)
    elif all(isinstance(v, int) for v in value):
        body = " ".join("ints: %d" % v for v in value)
    else:
        body = " ".join("strings: " + _quote(v) for v in value)
    return "arg { name: %s %s }" % (_quote(name), body)


def write_pbtxt(net):
    """Caffe2 NetDef text, as Caffe2 writes it: fields in field-number order, device_option only
    on ops not on CPU 0, no dtypes (the tool infers the label's int32 from its readers)."""
    lines = []
    if net.get("name"):
        lines.append("name: %s" % _quote(net["name"]))
    for op in net["op"]:
        lines.append("op {")
        lines += ["  input: %s" % _quote(b) for b in op["input"]]
        lines += ["  output: %s" % _quote(b) for b in op["output"]]
        lines.append("  type: %s" % _quote(op["type"]))
        lines += ["  " + _arg_text(k, v) for k, v in op.get("arg", {}).items()]
        device = op_device(op)
        if device != CPU:
            lines.append("  device_option { device_type: %d device_id: %d }" % device)
        if op.get("engine"):
            lines.append("  engine: %s" % _quote(op["engine"]))
        lines.append("}")
    if net.get("type"):
        lines.append("type: %s" % _quote(net["type"]))
    lines += ["external_input: %s" % _quote(b) for b in net["external_input"]]
    lines += ["external_output: %s" % _quote(b) for b in net["external_output"]]
    return "\n".join(lines) + "\n"


_TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<punct>[{}<>\[\]:;,])
  | (?P<word>[^\s{}<>\[\]:;,"'\#]+)
""", re.VERBOSE)

_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "a": b"\a", "b": b"\b", "f": b"\f",
            "v": b"\v", "\\": b"\\", "'": b"'", '"': b'"', "?": b"?"}


def _unquote(token):
    body = token[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        e = body[i + 1]
        if e in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            out.append(int(m.group(0), 8) & 0xFF)
            i += 1 + len(m.group(0))
        elif e in "xX":
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])
            out.append(int(m.group(0), 16))
            i += 2 + len(m.group(0))
        elif e in "uU":
            n = 4 if e == "u" else 8
            out += chr(int(body[i + 2:i + 2 + n], 16)).encode("utf-8")
            i += 2 + n
        else:
            out += _ESCAPES[e]
            i += 2
    return out.decode("utf-8")


def _tokens(text):
    pos = 0
    out = []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError("bad text format at offset %d: %r" % (pos, text[pos:pos + 20]))
        pos = m.end()
        if m.lastgroup != "space":
            out.append((m.lastgroup, m.group(m.lastgroup)))
    return out


def parse_text_message(text):
    """Parses protobuf text format into a list of (field, value) pairs; a value is ("s", str)
    for a string (adjacent literals joined), ("w", token) for a number or enum name, or ("m",
    [pairs]) for a message. Accepts `{}` and `<>`, optional `:` before messages, `[a, b]` lists,
    `,` / `;` separators and # comments."""
    toks = _tokens(text)
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else (None, None)

    def take():
        tok = peek()
        pos[0] += 1
        return tok

    def value():
        kind, tok = take()
        if kind == "punct" and tok in "{<":
            return ("m", message("}" if tok == "{" else ">"))
        if kind == "string":
            s = _unquote(tok)
            while peek()[0] == "string":
                s += _unquote(take()[1])
            return ("s", s)
        if kind == "word":
            if tok == "-" and peek()[0] == "word":
                tok += take()[1]
            return ("w", tok)
        raise ValueError("unexpected %r in text format" % tok)

    def message(close):
        fields = []
        while True:
            kind, tok = peek()
            if kind is None:
                if close is not None:
                    raise ValueError("unterminated message")
                return fields
            if kind == "punct" and tok == close:
                take()
                return fields
            if kind == "punct" and tok in ";,":
                take()
                continue
            if kind != "word":
                raise ValueError("expected a field name, got %r" % tok)
            name = take()[1]
            if peek() == ("punct", ":"):
                take()
            if peek() == ("punct", "["):
                take()
                while peek() != ("punct", "]"):
                    fields.append((name, value()))
                    if peek() == ("punct", ","):
                        take()
                take()
            else:
                fields.append((name, value()))

    return message(None)


def _scalar(v):
    if v[0] == "m":
        raise ValueError("expected a scalar, got a message")
    return v[1]


def _to_int(v):
    return int(_scalar(v), 0)


def _to_float(v):
    t = _scalar(v).lower()
    if t.endswith("f") and not t.endswith("inf"):
        t = t[:-1]  # 1.5f
    return float(t)  # also inf, -infinity, nan


def _arg_from_fields(fields):
    """(name, value): f, i, s give a scalar, floats/ints/strings a list, n a net dict, nets a
    list of net dicts."""
    name = None
    value = None
    for k, v in fields:
        if k == "name":
            name = _scalar(v)
        elif k == "f":
            value = _to_float(v)
        elif k == "i":
            value = _to_int(v)
        elif k == "s":
            value = _scalar(v)
        elif k == "n":
            value = _net_from_fields(v[1])
        elif k in ("floats", "ints", "strings", "nets"):
            conv = {"floats": _to_float, "ints": _to_int, "strings": _scalar,
                    "nets": lambda m: _net_from_fields(m[1])}[k]
            value = (value if isinstance(value, list) else []) + [conv(v)]
    return name, value


def _op_from_fields(fields):
    op = {"type": "", "input": [], "output": [], "device": CPU, "arg": {}}
    for k, v in fields:
        if k in ("input", "output"):
            op[k].append(_scalar(v))
        elif k in ("type", "name", "engine"):
            op[k] = _scalar(v)
        elif k == "is_gradient_op":
            op[k] = _scalar(v) in ("true", "True", "1", "t")
        elif k == "device_option":
            d = {}
            for dk, dv in v[1]:
                if dk == "device_type":
                    d["type"] = _to_int(dv)
                elif dk in ("device_id", "cuda_gpu_id"):
                    d["id"] = _to_int(dv)
            op["device"] = (d.get("type", 0), d.get("id", 0))
        elif k == "arg":
            name, value = _arg_from_fields(v[1])
            op["arg"][name] = value
    return op


def _net_from_fields(fields):
    net = {"name": "", "type": "", "external_input": [], "external_output": [], "op": []}
    for k, v in fields:
        if k in ("name", "type"):
            net[k] = _scalar(v)
        elif k in ("external_input", "external_output"):
            net[k].append(_scalar(v))
        elif k == "op":
            net["op"].append(_op_from_fields(v[1]))
    return net


def parse_pbtxt(text):
    """A NetDef in text format as a net dict (fields other than the net dict's are ignored)."""
    return _net_from_fields(parse_text_message(text))
