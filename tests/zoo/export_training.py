"""The zoo's training models: zoo modules with a loss a user adds, exported for training.

Each model of TRAINING_MODELS (export_zoo.py's modules, seeded the same way) is wrapped with the
mean squared error of every floating-point output against a seeded target (the targets are graph
inputs; TRAINING_VARIANTS adds other sizes and F.cross_entropy), put in train mode with dropout probabilities set to 0 (PyTorch's dropout masks are
random), and exported as the PyTorch docs show for training: `training=TrainingMode.TRAINING`,
`do_constant_folding=False` (batch normalisation keeps its batch statistics and its parameters).
Beside `MODEL.train.onnx`:
  MODEL.train.inputs/NAME.npy   the inputs (the model's and the targets)
  MODEL.train.grads/K.npy       PyTorch autograd's gradient of parameter K (float32), and
  MODEL.train.grads/K.f64.npy   the same step in float64 (the module and inputs cast): the exact
                                gradient both float32 computations are measured against.
The manifest entry names each parameter's ONNX initializers: the exporter keeps a parameter
under its name or, for a Linear read by MatMul, as a transposed copy; a parameter read twice
(tied embeddings) can have both, and its gradient is then the sum over them.
"""

import copy
import os
import time
import warnings

from zoo_common import allocation_peak

TRAINING_MODELS = [
    "mlp", "resnet18", "mobilenet_v3_small", "squeezenet1_1", "gpt_decoder", "text_encoder",
    "vit_small", "bert_like", "alibi_encoder", "seq2seq_transformer", "unet", "lstm_classifier",
    "gru_tagger",
]


# Training-only variants: (the zoo entry, its example inputs or None for the entry's, the loss)
# under another name. The loss is "mse" (as every TRAINING_MODELS entry) or "cross_entropy":
# F.cross_entropy of the output [N, C] against seeded labels (an input "labels").
TRAINING_VARIANTS = {
    # resnet18 at 224 px has a ReLU input 1.4e-6 from 0 (typical 0.9, layer4.0's last ReLU,
    # channel 146): float32 rounding decides which side it falls on, so no float32 gradient is
    # bound to agree there (train_zoo.py, KNOWN_GRADIENT_MISMATCHES). At 64 px it has none.
    "resnet18_64px": ("resnet18", lambda torch: (torch.randn(2, 3, 64, 64),), "mse"),
    "vit_small_cross_entropy": ("vit_small", None, "cross_entropy"),
    # Resize backward (the head's bilinear upsampling) at a size a CPU step takes a second at;
    # batch 2 for the batch statistics. (densenet121's Pads are all zeros, and its 120 ReLUs
    # meet inputs within 1e-6 of 0 at every size tried, 64-112 px: both float32 gradients
    # then differ from float64's by up to 1e-1, which measures the kinks, not the rules.)
    "lraspp_96px": ("lraspp_mobilenet_v3_large", lambda torch: (torch.randn(2, 3, 96, 96),),
                    "mse"),
}


def training_entries(entries):
    """The zoo entries to export for training: TRAINING_MODELS, then TRAINING_VARIANTS."""
    torch = _torch()
    by_name = {e[0]: e for e in entries}
    chosen = [by_name[n] for n in TRAINING_MODELS if n in by_name]
    for name, (base, inputs, _) in TRAINING_VARIANTS.items():
        if base in by_name:
            e = by_name[base]
            make = e[2] if inputs is None else (lambda inputs=inputs: inputs(torch))
            chosen.append((name, e[1], make) + tuple(e[3:]))
    return chosen


def loss_of(name):
    return TRAINING_VARIANTS[name][2] if name in TRAINING_VARIANTS else "mse"


def base_of(name):
    """The zoo model a training model is made of."""
    return TRAINING_VARIANTS[name][0] if name in TRAINING_VARIANTS else name


def _torch():
    import torch
    return torch


def _with_loss(model, n_inputs, flatten, loss_kind):
    torch = _torch()

    class WithLoss(torch.nn.Module):
        """The model, then the loss a user adds: the mean squared error of each floating-point
        output against its target (the inputs after the model's), or the cross-entropy of the
        first output against the labels."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            outputs = [y for y in flatten(self.model(*args[:n_inputs])) if y.is_floating_point()]
            if loss_kind == "cross_entropy":
                return torch.nn.functional.cross_entropy(outputs[0], args[n_inputs])
            loss = 0
            for y, target in zip(outputs, args[n_inputs:]):
                loss = loss + ((y - target) ** 2).mean()
            return loss

    return WithLoss()


def _step_peak_bytes(module, args):
    """The most bytes PyTorch holds allocated during one training step (forward and backward,
    gradients set to None first, so the parameters' gradients are made in the step), beyond what
    was allocated before it (weights, inputs): the profiler's allocation events, after a warm-up
    step, as the zoo's forward peak."""
    from torch.profiler import ProfilerActivity, profile
    module.zero_grad(set_to_none=True)
    module(*args).backward()
    module.zero_grad(set_to_none=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        module(*args).backward()
    return allocation_peak(prof)


# The learning rate of the step with the update in the backward pass (both sides use it; the
# memory does not depend on it).
FUSED_LR = 0.01


def _fused_step_peak_bytes(module, args):
    """The same, for a step that applies SGD to each parameter as soon as its gradient is
    complete and frees the gradient (PyTorch's "optimizer step in the backward pass"; torch 1.13
    has no post-accumulate hook, so each parameter's AccumulateGrad node gets one), on a copy:
    the module keeps its weights."""
    from torch.profiler import ProfilerActivity, profile
    import torch
    module = copy.deepcopy(module)
    hooks = []
    for p in module.parameters():
        if not p.requires_grad:
            continue
        accumulate = p.expand_as(p).grad_fn.next_functions[0][0]

        def update(_grad_inputs, _grad_outputs, p=p):
            with torch.no_grad():
                p.add_(p.grad, alpha=-FUSED_LR)
            p.grad = None
        hooks.append((accumulate, accumulate.register_hook(update)))
    module.zero_grad(set_to_none=True)
    module(*args).backward()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        module(*args).backward()
    return allocation_peak(prof)


def _gradients(module, args):
    module.zero_grad(set_to_none=True)
    module(*args).backward()
    return {name: p.grad.detach().clone() for name, p in module.named_parameters()
            if p.grad is not None}


def _initializers_of(proto, params):
    """For each parameter (name -> float32 ndarray): [(initializer, transposed)] that a node
    reads and that hold its values exactly, as they are or transposed."""
    import numpy as np
    from onnx import numpy_helper
    by_bytes = {}
    read = {name for node in proto.graph.node for name in node.input}
    for t in proto.graph.initializer:
        if t.name not in read:  # an unused copy of a parameter is not where its gradient goes
            continue
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32:
            by_bytes.setdefault((a.shape, a.tobytes()), []).append(t.name)
    found = {}
    for name, value in params.items():
        hits = [(n, False) for n in by_bytes.get((value.shape, value.tobytes()), [])]
        if value.ndim == 2:
            t = np.ascontiguousarray(value.T)
            hits += [(n, True) for n in by_bytes.get((t.shape, t.tobytes()), [])]
        found[name] = hits
    return found


def export_training(entry, folder, flatten, opset):
    """Exports one training model into `folder`; returns its manifest entry."""
    torch = _torch()
    import numpy as np
    import onnx
    name, build, make_inputs, input_names, _, _ = entry
    start = time.time()
    torch.manual_seed(0)
    model = build()
    with torch.no_grad():  # as export_zoo.py: zero-initialised heads get small values
        for p in model.parameters():
            if p.numel() > 1 and not p.any():
                p.normal_(0.0, 0.02)
    # Distinct values in every parameter: cloned layers (nn.TransformerEncoder) start equal,
    # biases start at zero, and the parameters are found in the export by their values.
    torch.manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        elif isinstance(m, torch.nn.MultiheadAttention):
            m.dropout = 0.0
    model.train()
    torch.manual_seed(1)
    inputs = tuple(make_inputs())
    with torch.no_grad():
        outputs = [y for y in flatten(model(*inputs)) if y.is_floating_point()]
    torch.manual_seed(2)
    loss_kind = loss_of(name)
    if loss_kind == "cross_entropy":
        targets = (torch.randint(0, outputs[0].shape[1], (outputs[0].shape[0],)),)
        target_names = ["labels"]
    else:
        targets = tuple(torch.randn_like(y) for y in outputs)
        target_names = [f"target{i}" for i in range(len(targets))]
    module = _with_loss(model, len(inputs), flatten, loss_kind)
    args = inputs + targets
    names = list(input_names) + target_names
    path = os.path.join(folder, name + ".train.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, opset_version=opset, input_names=names,
                          output_names=["loss"], training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
    proto = onnx.load(path, load_external_data=False)
    grads = _gradients(module, args)
    module64 = copy.deepcopy(module).double()
    args64 = tuple(a.double() if a.is_floating_point() else a for a in args)
    grads64 = _gradients(module64, args64)
    peak = _step_peak_bytes(module, args)
    fused_peak = _fused_step_peak_bytes(module, args)
    graph_inputs = [i.name for i in proto.graph.input
                    if i.name not in {t.name for t in proto.graph.initializer}]
    by_name = dict(zip(names, args))
    os.makedirs(os.path.join(folder, name + ".train.inputs"))
    for n in graph_inputs:
        np.save(os.path.join(folder, name + ".train.inputs", n + ".npy"),
                by_name[n].detach().numpy())
    grad_dir = os.path.join(folder, name + ".train.grads")
    os.makedirs(grad_dir)
    params = {n: p.detach().numpy() for n, p in module.named_parameters() if n in grads}
    homes = _initializers_of(proto, params)
    entries = []
    for k, n in enumerate(sorted(grads)):
        np.save(os.path.join(grad_dir, f"{k}.npy"), grads[n].numpy())
        np.save(os.path.join(grad_dir, f"{k}.f64.npy"), grads64[n].numpy())
        entries.append({"name": n, "file": f"{k}.npy", "file_f64": f"{k}.f64.npy",
                        "onnx": [[i, t] for i, t in homes[n]]})
    return {"file": name + ".train.onnx", "inputs": graph_inputs, "params": entries,
            "loss": loss_kind,
            "torch_train_peak_bytes": peak, "torch_fused_peak_bytes": fused_peak,
            "fused_lr": FUSED_LR, "onnx_ops": sorted({n.op_type for n in proto.graph.node}),
            "export_seconds": round(time.time() - start, 2)}
