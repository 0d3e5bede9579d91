"""The zoo's training check (run_zoo.py calls it): each training model (export_training.py) is
planned with `--mode training --loss loss`, then executed on its inputs, and every parameter's
gradient is compared with PyTorch autograd's.

Gradients are measured against the float64 step (PyTorch's module and inputs cast): the error of
a gradient is max|g - g64| / max|g64| per parameter (max|g64| at least a ten-thousandth of the
model's largest gradient: an exactly-zero gradient is not measured against its noise). Ours must
be within
max(GRAD_RTOL, GRAD_FACTOR x PyTorch float32's own error) of it. Where PyTorch's float32 is
close to exact (everything without batch statistics) that is 1e-4. Where it is not, no float32
computation can do better: a weight followed by batch normalisation in train mode has a gradient
orthogonal to it, a sum of terms that cancel, and PyTorch's own float32 gradient of resnet18's
layer3 is 9e-2 from float64. The table also gives our error against PyTorch's float32.

Each model is planned and executed again with `--recompute sqrt`, with `--recompute cheap`
(docs/cures.md) and with `--no-in-place` (docs/in_place.md): every run's outputs must be
byte-identical to the plain run's; the table gives the recomputed arenas beside the plain one,
with the ops rerun and their FLOPs. And with `--update-in-backward` (SGD as each gradient
completes, docs/cures.md): each updated param must be byte-identical to its initializer minus
the learning rate times the plain run's gradient; its arena stands beside PyTorch's peak for the
same step (the update in AccumulateGrad hooks, export_training.py). The update with
`--recompute sqrt`, and with `cheap`, must give the update's outputs byte for byte (a recomputed
op reads a param before its update).

KNOWN_TRAINING_REFUSALS lists the models refused on purpose, with the text of the refusal; one
that starts to train fails until the list is updated, as does any other failure.
"""

import json
import os
import re

from zoo_common import start_check

GRAD_RTOL = 1e-4
GRAD_FACTOR = 3.0

# Models whose gradients are known to differ from PyTorch's, with what is known; one that starts
# to match fails until the list is updated.
KNOWN_GRADIENT_MISMATCHES = {
    "resnet18": "a ReLU kink: one input of layer4.0's last ReLU is 1.4e-6 from 0 (typical "
                "0.9), below float32's rounding of it; ours falls on the other side than "
                "PyTorch's, and the gradients before it differ by up to 1.2e-1 "
                "(resnet18_64px, without such an input, matches)",
}

KNOWN_TRAINING_REFUSALS = {}


def _load_outputs(out_dir, stdout):
    """Output name -> path: files are named NAME.npy unless the report maps a name to a file."""
    names = {}
    for line in stdout.splitlines():
        m = re.match(r"^  (.+) -> (\S+\.npy)$", line)
        if m:
            names[m.group(1)] = os.path.join(out_dir, m.group(2))
    return names


def check_training(run, first_line, human, tool, folder, work, name, info):
    """One training model: (row, failures)."""
    import numpy as np
    row, mwork = start_check(name, info, work, name + ".train")
    if mwork is None:
        return row, []
    failures = []
    model = os.path.join(folder, info["file"])
    flags = ["--mode", "training", "--loss", "loss"]
    rc, out, err, _ = run([tool, model, *flags, "--format", "json"])
    known = KNOWN_TRAINING_REFUSALS.get(name)
    if rc != 0:
        message = first_line(err)
        if known and known in err:
            row["status"] = "refused (known)"
            row["note"] = message.replace("optimize-net: ", "")
            return row, []
        row["status"] = "FAILED to plan"
        row["note"] = message
        return row, [f"{name} (training): does not plan: {message}"]
    if known:
        failures.append(f"{name} (training): plans now, but KNOWN_TRAINING_REFUSALS lists it")
    plan = json.loads(out)
    inputs = sum(-(-v["bytes"] // 256) * 256 for v in plan["values"]
                 if v["role"] == "input" and v["offset"] is not None)
    row.update(ops=plan["ops"], arena=plan["arena_bytes"], lower=plan["lower_bound_bytes"],
               input_bytes=inputs, torch_peak=info.get("torch_train_peak_bytes"))
    out_dir = os.path.join(mwork, "outputs")
    rc, out, err, _ = run([tool, model, *flags, "--execute", "host", "--inputs",
                           os.path.join(folder, name + ".train.inputs"), "--outputs-out", out_dir])
    if rc != 0:
        row["status"] = "FAILED to execute"
        row["note"] = first_line(err)
        return row, failures + [f"{name} (training): execution failed: {first_line(err)}"]
    files = _load_outputs(out_dir, out)
    for kind in ("sqrt", "cheap"):
        failures += _check_recompute(run, first_line, tool, model, flags, folder, name, mwork,
                                     out_dir, row, kind)
    failures += _check_update_in_backward(run, first_line, tool, model, flags, folder, name,
                                          mwork, out_dir, info, row)
    failures += _check_same_outputs(run, first_line, tool, model, [*flags, "--no-in-place"],
                                    "--no-in-place", folder, name,
                                    os.path.join(mwork, "outputs_apart"), out_dir)
    grad_dir = os.path.join(folder, name + ".train.grads")
    worst = {"ours": 0.0, "torch": 0.0, "ours32": 0.0}
    # A parameter whose exact gradient is 0 (a bias a softmax cancels) is measured against a
    # ten-thousandth of the model's largest gradient, not against its own float noise.
    largest = max((float(np.abs(np.load(os.path.join(grad_dir, p["file_f64"]))).max())
                   for p in info["params"]), default=0.0)
    for p in info["params"]:
        if not p["onnx"]:
            failures.append(f"{name} (training): parameter {p['name']} is in no initializer")
            continue
        ours = None
        for init, transposed in p["onnx"]:
            path = files.get(init + "_grad", os.path.join(out_dir, init + "_grad.npy"))
            if not os.path.exists(path):
                failures.append(f"{name} (training): no gradient output for '{init}' "
                                f"(parameter {p['name']})")
                ours = None
                break
            g = np.load(path).astype(np.float64)
            g = g.T if transposed else g
            ours = g if ours is None else ours + g
        if ours is None:
            continue
        g32 = np.load(os.path.join(grad_dir, p["file"])).astype(np.float64)
        g64 = np.load(os.path.join(grad_dir, p["file_f64"]))
        scale = max(np.abs(g64).max(), 1e-4 * largest, 1e-30)
        if ours.shape != g64.shape:
            failures.append(f"{name} (training): gradient of {p['name']} is {ours.shape}, "
                            f"PyTorch's {g64.shape}")
            continue
        e_ours = float(np.abs(ours - g64).max() / scale)
        e_torch = float(np.abs(g32 - g64).max() / scale)
        e_ours32 = float(np.abs(ours - g32).max() / scale)
        worst["ours"] = max(worst["ours"], e_ours)
        worst["torch"] = max(worst["torch"], e_torch)
        worst["ours32"] = max(worst["ours32"], e_ours32)
        if not e_ours <= max(GRAD_RTOL, GRAD_FACTOR * e_torch):  # (NaN fails)
            failures.append(f"{name} (training): gradient of {p['name']} is {e_ours:.1e} from "
                            f"float64 autograd, PyTorch's float32 {e_torch:.1e}")
    row.update(grad_error=worst["ours"], torch_grad_error=worst["torch"],
               grad_error_32=worst["ours32"], params=len(info["params"]))
    mismatch = KNOWN_GRADIENT_MISMATCHES.get(name)
    gradient_failures = [f for f in failures if "gradient of" in f]
    if mismatch and gradient_failures and len(gradient_failures) == len(failures):
        row["status"] = "gradients differ (known)"
        row["note"] = mismatch
        return row, []
    if mismatch:
        failures.append(f"{name} (training): gradients match now, but "
                        "KNOWN_GRADIENT_MISMATCHES lists it")
    row["status"] = "trains" if not failures else "FAILED"
    return row, failures


def _check_recompute(run, first_line, tool, model, flags, folder, name, mwork, plain_dir, row,
                     kind):
    """Plans and runs the model with --recompute KIND (sqrt or cheap); its output files must
    equal the plain run's (in `plain_dir`) byte for byte. Fills the row's columns for KIND
    (sqrt: arena_recompute, recomputed_ops, extra_flops; cheap: those with _cheap); returns the
    failures."""
    recompute = ["--recompute", kind]
    rc, out, err, _ = run([tool, model, *flags, *recompute, "--format", "json"])
    if rc != 0:
        return [f"{name} (training, --recompute {kind}): does not plan: {first_line(err)}"]
    plan = json.loads(out)
    chosen = plan.get("recompute") or {}
    suffix = "" if kind == "sqrt" else "_" + kind
    row.update({"arena_recompute" + suffix: plan["arena_bytes"],
                "recomputed_ops" + suffix: chosen.get("ops", 0),
                "extra_flops" + suffix: chosen.get("extra_flops", 0),
                "forward_flops": chosen.get("forward_flops", 0)})
    return _check_same_outputs(run, first_line, tool, model, [*flags, *recompute],
                               " ".join(recompute), folder, name,
                               os.path.join(mwork, "outputs_recompute" + suffix), plain_dir)


def _check_update_in_backward(run, first_line, tool, model, flags, folder, name, mwork,
                              plain_dir, info, row):
    """Plans and runs the model with --update-in-backward (SGD as each gradient completes): every
    updated param must equal, byte for byte, its initializer minus the learning rate times the
    plain run's gradient (in float32: Mul, then Sub). Fills the row's fused-update columns;
    returns the failures."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    lr = info.get("fused_lr", 0.01)
    update = ["--update-in-backward", repr(lr)]
    what = f"{name} (training, --update-in-backward)"
    rc, out, err, _ = run([tool, model, *flags, *update, "--format", "json"])
    if rc != 0:
        return [f"{what}: does not plan: {first_line(err)}"]
    row.update(arena_fused=json.loads(out)["arena_bytes"],
               torch_fused_peak=info.get("torch_fused_peak_bytes"))
    out_dir = os.path.join(mwork, "outputs_fused")
    rc, out, err, _ = run([tool, model, *flags, *update, "--execute", "host", "--inputs",
                           os.path.join(folder, name + ".train.inputs"), "--outputs-out",
                           out_dir])
    if rc != 0:
        return [f"{what}: execution failed: {first_line(err)}"]
    updated = _load_outputs(out_dir, out)
    initializers = {t.name: t for t in onnx.load(model).graph.initializer}
    failures = []
    checked = 0
    for file in sorted(os.listdir(plain_dir)):
        param = file[:-len("_grad.npy")] if file.endswith("_grad.npy") else None
        if param not in initializers:
            continue
        path = updated.get(param, os.path.join(out_dir, param + ".npy"))
        if not os.path.exists(path):
            failures.append(f"{what}: no updated '{param}'")
            continue
        w = numpy_helper.to_array(initializers[param])
        g = np.load(os.path.join(plain_dir, file))
        expected = w - g * np.array(lr, dtype=w.dtype)
        if not np.array_equal(np.load(path), expected):
            failures.append(f"{what}: '{param}' is not its initializer minus lr x the plain "
                            "run's gradient")
        checked += 1
    if checked == 0:
        failures.append(f"{what}: no param was updated")
    # With recomputation too: a recomputed op that reads a param must read it before its update.
    for kind in ("sqrt", "cheap"):
        both = [*flags, *update, "--recompute", kind]
        rc, out, err, _ = run([tool, model, *both, "--format", "json"])
        if rc != 0:
            failures.append(f"{what} --recompute {kind}: does not plan: {first_line(err)}")
            continue
        suffix = "" if kind == "sqrt" else "_" + kind
        row["arena_fused_recompute" + suffix] = json.loads(out)["arena_bytes"]
        failures += _check_same_outputs(run, first_line, tool, model, both,
                                        f"--update-in-backward --recompute {kind}", folder, name,
                                        os.path.join(mwork, "outputs_fused_recompute" + suffix),
                                        out_dir)
    return failures


def _check_same_outputs(run, first_line, tool, model, flags, label, folder, name, out_dir,
                        plain_dir):
    """Executes the model planned with `flags` (`label`: what they add to the plain run's); its
    output files must equal those in `plain_dir` byte for byte. Returns the failures."""
    import numpy as np
    what = f"{name} (training, {label})"
    rc, out, err, _ = run([tool, model, *flags, "--execute", "host", "--inputs",
                           os.path.join(folder, name + ".train.inputs"), "--outputs-out",
                           out_dir])
    if rc != 0:
        return [f"{what}: execution failed: {first_line(err)}"]
    plain = sorted(f for f in os.listdir(plain_dir) if f.endswith(".npy"))
    failures = []
    if not plain:
        failures.append(f"{name} (training): the run wrote no outputs")
    if plain != sorted(f for f in os.listdir(out_dir) if f.endswith(".npy")):
        failures.append(f"{what}: other outputs than the plain run")
    for file in plain:
        other = os.path.join(out_dir, file)
        if os.path.exists(other) and not np.array_equal(
                np.load(os.path.join(plain_dir, file)), np.load(other), equal_nan=True):
            failures.append(f"{what}: {file} differs from the plain run")
    return failures


def training_table(rows, human):
    """One row per training model: PyTorch's step peak, our arena less inputs (and PyTorch's
    peak over it) plain and per cure, the gradient errors."""
    head = ("| model | ops | PyTorch step peak | arena − inputs (PyTorch / it) | "
            "--recompute cheap: PyTorch / it (rerun: ops, FLOPs) | "
            "--recompute sqrt: PyTorch / it (rerun) | "
            "--update-in-backward: it, PyTorch's step so / it | "
            "update + cheap: PyTorch so / it | update + sqrt: PyTorch plain / it | "
            "gradient error: ours vs float64 | PyTorch float32 vs float64 | "
            "ours vs PyTorch float32 | note |")
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        if "arena" not in r or "grad_error" not in r:
            lines.append(f"| {r['model']} | | | | | | | | | | | | {r.get('status', '')}: "
                         f"{r.get('note', '')} |")
            continue
        peak = r.get("torch_peak")
        peak_fused = r.get("torch_fused_peak")

        def over(key, reference=peak):
            """PyTorch's `reference` over the arena less inputs at `key`, or ''."""
            if key not in r or not reference:
                return ""
            arena = r[key] - r["input_bytes"]
            return f"{reference / arena:.2f}" if arena > 0 else ""

        def rerun(suffix):
            ops = r.get("recomputed_ops" + suffix, 0)
            if not ops:
                return "none"
            share = r["extra_flops" + suffix] / r["forward_flops"] if r["forward_flops"] else 0.0
            return f"{ops}, +{100 * share:.1f}%"

        def cure(key, suffix):
            return f"{over(key)} ({rerun(suffix)})" if key in r else ""

        fused = ""
        if "arena_fused" in r:
            fused = f"{human(r['arena_fused'] - r['input_bytes'])}, {over('arena_fused', peak_fused)}"
        lines.append(
            f"| {r['model']} | {r['ops']} | {human(peak) if peak else ''} | "
            f"{human(r['arena'] - r['input_bytes'])} ({over('arena')}) | "
            f"{cure('arena_recompute_cheap', '_cheap')} | {cure('arena_recompute', '')} | "
            f"{fused} | {over('arena_fused_recompute_cheap', peak_fused)} | "
            f"{over('arena_fused_recompute')} | {r['grad_error']:.1e} | "
            f"{r['torch_grad_error']:.1e} | {r['grad_error_32']:.1e} | {r.get('note', '')} |")
    return "\n".join(lines)
