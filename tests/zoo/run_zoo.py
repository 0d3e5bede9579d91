#!/usr/bin/python3
"""The model zoo test: real PyTorch exports, planned and executed as a new user would.

For every model export_zoo.py exports (or finds in its cache), with `optimize-net`:
  1. plan at first try, binding only the named dynamic axes at their exported sizes (the plan is
     checked by the tool's independent verifier before it is printed);
  2. plan over a range of every dynamic axis (a symbolic plan);
  3. execute on the host with PyTorch's own input (`--inputs`) and compare every output with
     PyTorch's (`--expect`, relative error max|ours - torch| / max|torch| <= 1e-4 for float32);
     a model whose ops lack a kernel fails, unless KNOWN_MISSING_KERNELS lists it with a reason;
     and execute again with `--no-in-place`: every output byte-identical to the in-place run's
     (in-place reuse of dying inputs, docs/in_place.md, must not change a bit);
  4. write the net (`--net-out`) and plan it again from the written file: the same arena.
Beside the main table, a memory table: our arena without the graph inputs against eager
PyTorch's peak during the same forward pass (export_zoo.py measures it with the profiler) and,
with --ort-peak bench/peers/ort_peak.js (node and onnxruntime-node; not needed by the test),
ONNX Runtime's peak for one run of the same file; and the lower bound with and without in-place
reuse.
A model PyTorch itself cannot export is listed with PyTorch's error. A model listed in
KNOWN_REFUSALS must be refused with that message (so that a fix shows here too); any other
failure fails the test. The table (markdown) goes to stdout and to --table.

  /usr/bin/python3 tests/zoo/run_zoo.py --optimize-net build/tools/optimize-net \
      --cache ~/.cache/memonger/zoo --work build/zoo
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

import train_zoo
from zoo_common import start_check
from export_training import base_of

HERE = os.path.dirname(os.path.abspath(__file__))

# Refused on purpose, with the reason, until the capability exists (issue numbers are the
# tracker's). The message must still contain the text given here.
KNOWN_REFUSALS = {}

# Models the host executor cannot run yet, with the reason. Every zoo model executes today: a
# model added here must say why, and a fix shows when its entry goes stale.
KNOWN_MISSING_KERNELS = {}
NOT_RUN_YET = ("no kernel", "has no host kernel", "the executor runs fixed sizes only")

# Models whose file means other outputs than PyTorch computed, with the reason and a patch that
# makes the file say what PyTorch meant: the model must differ from PyTorch as written, and match
# it once patched (a fix, or an exporter that writes the file right, shows as a stale entry).
def _roi_align_as_pytorch(model):
    import onnx
    for node in model.graph.node:
        if node.op_type == "RoiAlign" and not any(
                a.name == "coordinate_transformation_mode" for a in node.attribute):
            node.attribute.append(onnx.helper.make_attribute(
                "coordinate_transformation_mode", "output_half_pixel"))


KNOWN_EXPORT_MISMATCHES = {
    "fasterrcnn_mobilenet_v3_large_320_fpn": (
        "torchvision's roi_align(aligned=False) is exported without coordinate_transformation_mode "
        "at opset 17, whose default (half_pixel) samples half a pixel off PyTorch's; with "
        "output_half_pixel, as PyTorch computed, the outputs match",
        _roi_align_as_pytorch),
}

# Models whose --net-out does not load back, with the reason (a fix shows when it goes stale).
KNOWN_NET_OUT_FAILURES = {
    "fasterrcnn_mobilenet_v3_large_320_fpn": (
        "declares no dtype and shape",
        "the net format declares one type per name: an int64 Reshape output that its float32 "
        "Cast overwrites in place keeps no declaration, and a Reshape by a constant input is "
        "typed only by one"),
    # Matched against the mismatch line: the net loads but plans to another arena.
    "token_histogram": (
        "plans to 7168, not 12288",
        "the net format marks no size as data-dependent: read back, Unique's outputs are exact "
        "at their bound, and the broadcasting ops after them pair in place, which a bound "
        "forbids (docs/in_place.md; --no-in-place plans both to 12288)"),
}

# Outputs whose error may exceed the default tolerance, and why.
TOLERANCE = {
    "float32": 1e-4,
    "float16": 1e-2,
    # Against the float32 forward of the same weights: every value stored in bfloat16 (8 bits
    # of mantissa) between ops rounds by up to 2^-9, and the roundings add up over the layers.
    "bfloat16": 2e-2,
}

TIMEOUT_S = 600


def run(args, timeout=TIMEOUT_S):
    start = time.time()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.time() - start
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout} s", time.time() - start


def first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024.0
    return str(n)


def dim_flags(dims):
    flags = []
    for symbol, size in sorted(dims.items()):
        flags += ["--dim", f"{symbol}={size}"]
    return flags


def ort_peak(script, model, inputs_dir, work):
    """ONNX Runtime's peak bytes allocated during one run (bench/peers/ort_peak.js says how,
    with bench/peers/alloc_peak.c counting the allocations), or None."""
    shim = os.path.join(work, "alloc_peak.so")
    if not os.path.exists(shim):
        source = os.path.join(os.path.dirname(os.path.abspath(script)), "alloc_peak.c")
        if run(["cc", "-O2", "-shared", "-fPIC", "-o", shim, source])[0] != 0:
            return None
    counts = os.path.join(work, "alloc_peak.txt")
    if os.path.exists(counts):
        os.remove(counts)
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", LD_PRELOAD=shim,
               ALLOC_PEAK_OUT=counts)
    try:
        p = subprocess.run(["node", "--expose-gc", script, model, inputs_dir], env=env,
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    return json.loads(p.stdout.strip().splitlines()[-1]).get("peak_bytes")


def check_model(tool, folder, work, name, info, ort_script=None):
    row, mwork = start_check(name, info, work, name)
    if mwork is None:
        return row, []
    failures = []
    model = os.path.join(folder, info["file"])
    dims = info.get("dims", {})

    # 1. First try: only the named dynamic axes, at their exported sizes.
    plan_json = os.path.join(mwork, "plan.json")
    net_out = os.path.join(mwork, "net.pbtxt")
    rc, out, err, secs = run([tool, model, *dim_flags(dims), "--format", "json",
                              "--plan-json", plan_json, "--net-out", net_out])
    known = KNOWN_REFUSALS.get(name)
    if rc != 0:
        message = first_line(err)
        if known and known[0] in err:
            row["status"] = "refused (known)"
            row["note"] = known[1]
            return row, []
        row["status"] = "FAILED to plan"
        row["note"] = message
        return row, [f"{name}: does not plan at first try: {message}"]
    if known:
        failures.append(f"{name}: plans now, but KNOWN_REFUSALS still lists it: update the zoo")
    plan = json.loads(out)
    row.update(ops=plan["ops"], values=len(plan["values"]), arena=plan["arena_bytes"],
               lower=plan["lower_bound_bytes"], plan_s=plan["planning_seconds"],
               wall_s=round(secs, 2), weights=plan["static_bytes"])
    if plan["arena_bytes"] < plan["lower_bound_bytes"]:
        failures.append(f"{name}: arena {plan['arena_bytes']} below the lower bound")
    # The graph inputs live for the whole run in the arena; eager PyTorch's peak leaves the
    # input out, so the memory table does too (each input aligned as the plan aligns it).
    row["input_bytes"] = sum(-(-v["bytes"] // 256) * 256 for v in plan["values"]
                             if v["role"] == "input" and v["offset"] is not None)
    row["eager_peak"] = info.get("torch_eager_peak_bytes")
    if ort_script:
        row["ort_peak"] = ort_peak(ort_script, model, os.path.join(folder, name + ".inputs"),
                                   work)
    rc, out, err, _ = run([tool, model, *dim_flags(dims), "--format", "json", "--no-in-place"])
    if rc != 0:
        failures.append(f"{name}: does not plan with --no-in-place: {first_line(err)}")
    else:
        apart = json.loads(out)
        row.update(arena_apart=apart["arena_bytes"], lower_apart=apart["lower_bound_bytes"])
        if plan["lower_bound_bytes"] > apart["lower_bound_bytes"]:
            failures.append(f"{name}: in-place reuse raised the lower bound")

    # 2. Ranges of the dynamic axes.
    ranges = info.get("ranges", {})
    if ranges:
        flags = []
        for symbol, (lo, hi) in sorted(ranges.items()):
            flags += ["--dim", f"{symbol}={lo}..{hi}"]
        rc, out, err, _ = run([tool, model, *flags, "--time-limit", "1"])
        if rc != 0:
            row["range"] = "FAILED"
            failures.append(f"{name}: does not plan over {' '.join(flags)}: {first_line(err)}")
        else:
            row["range"] = ", ".join(f"{s}={lo}..{hi}" for s, (lo, hi) in sorted(ranges.items()))
    else:
        row["range"] = "no dynamic axis"

    # 3. Execute with PyTorch's input, compared with PyTorch's outputs.
    outputs_dir = os.path.join(mwork, "outputs")
    rc, out, err, secs = run([tool, model, *dim_flags(dims), "--execute", "host",
                              "--inputs", os.path.join(folder, name + ".inputs"),
                              "--outputs-out", outputs_dir])
    missing_known = KNOWN_MISSING_KERNELS.get(name)
    if rc != 0:
        message = first_line(err)
        if any(reason in message for reason in NOT_RUN_YET) and missing_known:
            row["execution"] = "kernels missing (known)"
            row["note"] = f"{missing_known}: {message.split(': ', 1)[-1]}"
        else:
            row["execution"] = "FAILED"
            row["note"] = message
            failures.append(f"{name}: execution failed: {message}")
    else:
        if missing_known:
            failures.append(f"{name}: executes now, but KNOWN_MISSING_KERNELS still lists it")
        row["exec_s"] = round(secs, 2)
        match = re.search(r"ops in ([0-9.]+) ms", out)
        if match:
            row["kernel_s"] = float(match.group(1)) / 1000
        mismatch = KNOWN_EXPORT_MISMATCHES.get(name)
        if mismatch:
            worst = check_export_mismatch(tool, model, dims, folder, name, info, mwork,
                                          outputs_dir, mismatch, row, failures)
        else:
            worst = compare_outputs(folder, name, info, outputs_dir, failures)
        row["execution"] = "" if worst is None else f"{worst:.1e}"
        compare_without_in_place(tool, model, dims, folder, name, info, mwork, outputs_dir,
                                 row, failures)
    torch_forward = info.get("torch_forward")
    if torch_forward:
        row["torch_s"] = torch_forward["seconds"]
        row["torch_1thread_s"] = torch_forward["seconds_1thread"]
        row["torch_threads"] = torch_forward["threads"]

    # 4. The written net plans again to the same arena.
    rc, out, err, _ = run([tool, net_out, *dim_flags(dims), "--format", "json"])
    known_net_out = KNOWN_NET_OUT_FAILURES.get(name)
    if rc != 0 and known_net_out and known_net_out[0] in err:
        row["net_out"] = "fails (known)"
        row["note"] = "; ".join(filter(None, [row.get("note"), known_net_out[1]]))
    elif rc != 0:
        row["net_out"] = "FAILED"
        failures.append(f"{name}: --net-out does not load back: {first_line(err)}")
    else:
        again = json.loads(out)["arena_bytes"]
        mismatch = (f"{name}: --net-out plans to {again}, not {plan['arena_bytes']}"
                    if again != plan["arena_bytes"] else None)
        if known_net_out and mismatch and known_net_out[0] in mismatch:
            row["net_out"] = "differs (known)"
            row["note"] = "; ".join(filter(None, [row.get("note"), known_net_out[1]]))
        elif known_net_out:
            failures.append(f"{name}: --net-out plans as before now ({mismatch or 'the same'}), "
                            "but KNOWN_NET_OUT_FAILURES lists it")
        else:
            row["net_out"] = "same" if mismatch is None else f"{again} != {row['arena']}"
            if mismatch:
                failures.append(mismatch)
    return row, failures


def compare_without_in_place(tool, model, dims, folder, name, info, mwork, outputs_dir, row,
                             failures):
    """Runs the model again with every output apart from its inputs: each output must be the
    same bytes as the in-place run's."""
    apart_dir = os.path.join(mwork, "outputs_apart")
    rc, _, err, _ = run([tool, model, *dim_flags(dims), "--execute", "host", "--no-in-place",
                         "--inputs", os.path.join(folder, name + ".inputs"),
                         "--outputs-out", apart_dir])
    if rc != 0:
        row["in_place"] = "FAILED"
        failures.append(f"{name}: --no-in-place execution failed: {first_line(err)}")
        return
    for out_name in info["outputs"]:
        paths = [os.path.join(d, out_name + ".npy") for d in (outputs_dir, apart_dir)]
        if not all(os.path.exists(p) for p in paths):
            continue  # compare_outputs named the missing one
        with open(paths[0], "rb") as a, open(paths[1], "rb") as b:
            if a.read() != b.read():
                row["in_place"] = "DIFFERS"
                failures.append(f"{name}: output '{out_name}' differs between the in-place "
                                "and the --no-in-place run")
                return
    row["in_place"] = "identical"


def check_export_mismatch(tool, model, dims, folder, name, info, mwork, outputs_dir, mismatch,
                          row, failures):
    """The model as written must differ from PyTorch's outputs; patched as PyTorch meant it,
    it must match them. Returns the patched run's error."""
    import onnx
    reason, patch = mismatch
    as_written = []
    compare_outputs(folder, name, info, outputs_dir, as_written)
    if not as_written:
        failures.append(f"{name}: matches PyTorch as written, but KNOWN_EXPORT_MISMATCHES lists it")
    patched = onnx.load(model)
    patch(patched)
    patched_path = os.path.join(mwork, "patched.onnx")
    onnx.save(patched, patched_path)
    patched_dir = os.path.join(mwork, "outputs_patched")
    rc, _, err, _ = run([tool, patched_path, *dim_flags(dims), "--execute", "host",
                         "--inputs", os.path.join(folder, name + ".inputs"),
                         "--outputs-out", patched_dir])
    if rc != 0:
        failures.append(f"{name}: the patched model does not execute: {first_line(err)}")
        return None
    row["note"] = f"as written: {len(as_written)} outputs differ; {reason}"
    return compare_outputs(folder, name, info, patched_dir, failures)


def detections_in_order(got, expected):
    """Detection outputs (boxes, scores, labels) with the order of near-equal scores made the
    same on both sides: two detections whose scores differ by less than float32 rounding of a
    deep net (1e-5 of the top score) come in either order, as sums rounded differently decide.
    Returns (got, expected) dicts of arrays, reordered alike within such runs."""
    import numpy as np
    scores_g, scores_e = got["scores"], expected["scores"]
    if scores_g.shape != scores_e.shape or scores_e.ndim != 1 or scores_e.size == 0:
        return got, expected
    tie = 1e-5 * float(np.max(np.abs(scores_e)))
    order_g = np.arange(scores_e.size)
    order_e = np.arange(scores_e.size)
    start = 0
    for i in range(1, scores_e.size + 1):
        if i < scores_e.size and abs(float(scores_e[i]) - float(scores_e[i - 1])) <= tie:
            continue
        # entries [start, i) are one run of near-equal scores: order both by label, then box
        def key(d, j):
            return (int(d["labels"][j]), *[round(float(v), 3) for v in d["boxes"][j]])
        order_g[start:i] = sorted(range(start, i), key=lambda j: key(got, j))
        order_e[start:i] = sorted(range(start, i), key=lambda j: key(expected, j))
        start = i
    return ({k: v[order_g] for k, v in got.items()},
            {k: v[order_e] for k, v in expected.items()})


def bf16_to_f32(a):
    import numpy as np
    return (a.astype(np.uint32) << 16).view(np.float32)


def compare_outputs(folder, name, info, outputs_dir, failures):
    import numpy as np
    worst = 0.0
    detection = {"boxes", "scores", "labels"} <= set(info["outputs"]) and all(
        os.path.exists(os.path.join(outputs_dir, n + ".npy")) for n in ("boxes", "scores", "labels"))
    if detection:
        got_all = {n: np.load(os.path.join(outputs_dir, n + ".npy"))
                   for n in ("boxes", "scores", "labels")}
        expected_all = {n: np.load(os.path.join(folder, name + ".expected", n + ".npy"))
                        for n in ("boxes", "scores", "labels")}
        if all(got_all[n].shape == expected_all[n].shape for n in got_all):
            got_all, expected_all = detections_in_order(got_all, expected_all)
        else:
            detection = False
    for out_name in info["outputs"]:
        expected = np.load(os.path.join(folder, name + ".expected", out_name + ".npy"))
        if detection and out_name in expected_all:
            expected = expected_all[out_name]
        # A half-precision model is held to the same module's float32 forward where the export
        # made one (export_zoo.py, _float32_reference): PyTorch's own half-precision CPU
        # kernels round inside their sums, by a CPU-dependent amount.
        reference = os.path.join(folder, name + ".reference_f32", out_name + ".npy")
        path = os.path.join(outputs_dir, out_name + ".npy")
        if not os.path.exists(path):
            failures.append(f"{name}: output '{out_name}' was not written")
            continue
        got = got_all[out_name] if detection and out_name in got_all else np.load(path)
        dtype = info.get("output_dtypes", {}).get(out_name, str(expected.dtype))
        if got.shape != expected.shape:
            failures.append(f"{name}: output '{out_name}' has shape {got.shape}, "
                            f"PyTorch's {expected.shape}")
            continue
        if dtype == "bfloat16":
            got, expected = bf16_to_f32(got), bf16_to_f32(expected)
        if os.path.exists(reference):
            expected = np.load(reference)
        if expected.dtype.kind in "biu":
            if not np.array_equal(got, expected):
                failures.append(f"{name}: output '{out_name}' differs from PyTorch's")
            continue
        got = got.astype(np.float64)
        expected = expected.astype(np.float64)
        scale = max(float(np.max(np.abs(expected))) if expected.size else 0.0, 1e-30)
        error = float(np.max(np.abs(got - expected))) / scale if expected.size else 0.0
        if not np.isfinite(error):
            error = float("inf")
        worst = max(worst, error)
        tolerance = TOLERANCE.get(dtype, 1e-4)
        if error > tolerance:
            failures.append(f"{name}: output '{out_name}' relative error {error:.2e} > "
                            f"{tolerance:g}")
    return worst


def ms(seconds):
    return f"{seconds * 1000:.1f} ms"


def speed(r):
    """The host executor's kernel time (one thread), PyTorch's forward with its default threads
    and with one, and the ratio to the default: the time a PyTorch user sees."""
    if "kernel_s" not in r or "torch_s" not in r:
        return "| | |"
    ratio = r["kernel_s"] / max(r["torch_s"], 1e-9)
    return (f"| {ms(r['kernel_s'])} | {ms(r['torch_s'])} / {ms(r['torch_1thread_s'])} | "
            f"{ratio:.2f} |")


def table(rows):
    head = ("| model | ops | values | arena | lower bound | planning | range | execution "
            "(rel. error) | --net-out | host kernels | PyTorch (default / 1 thread) | "
            "host / PyTorch | note |")
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        if "arena" not in r:
            lines.append(f"| {r['model']} | | | | | | | {r['status']} | | | | | "
                         f"{r.get('note', '')} |")
            continue
        lines.append(
            f"| {r['model']} | {r['ops']} | {r['values']} | {human(r['arena'])} | "
            f"{human(r['lower'])} | {r['plan_s']:.2f} s | {r.get('range', '')} | "
            f"{r.get('execution', '')} | {r.get('net_out', '')} {speed(r)} "
            f"{r.get('note', '')} |")
    return "\n".join(lines)


def memory_table(rows):
    """Our arena without the graph inputs against eager PyTorch's peak (one forward pass, the
    profiler's allocations) and ONNX Runtime's (where measured), with the lower bounds with and
    without in-place reuse."""
    head = ("| model | eager PyTorch peak | ONNX Runtime peak | arena − inputs | eager / arena | "
            "better peer / arena | lower bound − inputs | lower bound without in-place − inputs "
            "| arena without in-place − inputs | outputs with / without in-place |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        if "arena" not in r or "lower_apart" not in r:
            continue
        inputs = r["input_bytes"]
        eager = r.get("eager_peak")
        arena = r["arena"] - inputs
        ort = r.get("ort_peak")
        ratio = f"{eager / arena:.2f}" if eager and arena > 0 else ""
        peers = [p for p in (eager, ort) if p]
        better = f"{min(peers) / arena:.2f}" if peers and arena > 0 else ""
        lines.append(
            f"| {r['model']} | {human(eager) if eager else ''} | {human(ort) if ort else ''} | "
            f"{human(arena)} | {ratio} | {better} | "
            f"{human(r['lower'] - inputs)} | {human(r['lower_apart'] - inputs)} | "
            f"{human(r['arena_apart'] - inputs)} | {r.get('in_place', '')} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--optimize-net", required=True)
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/memonger/zoo"))
    parser.add_argument("--work", required=True)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--table", help="also write the table here")
    parser.add_argument("--ort-peak", help="bench/peers/ort_peak.js: also measure ONNX Runtime")
    args = parser.parse_args()
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"zoo: {e}: run with Debian's /usr/bin/python3 and python3-torch installed "
              "(tools/setup.sh installs it)", file=sys.stderr)
        return 1
    export = subprocess.run([sys.executable, os.path.join(HERE, "export_zoo.py"),
                             "--cache", args.cache], capture_output=True, text=True)
    sys.stderr.write(export.stderr)
    if export.returncode != 0:
        print("zoo: exporting failed", file=sys.stderr)
        return 1
    folder = export.stdout.strip().splitlines()[-1]
    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    os.makedirs(args.work, exist_ok=True)
    rows, failures = [], []
    names = sorted(manifest["models"])
    if args.only:
        names = [n for n in names if n in args.only]
    for name in names:
        start = time.time()
        row, failed = check_model(args.optimize_net, folder, args.work, name,
                                  manifest["models"][name], args.ort_peak)
        rows.append(row)
        failures += failed
        print(f"zoo: {name}: {'ok' if not failed else 'FAILED'} ({time.time() - start:.1f} s)",
              file=sys.stderr)
    # Training (train_zoo.py): the same models with a loss, gradients against PyTorch's.
    train_rows = []
    for name in sorted(manifest.get("training", {})):
        if args.only and base_of(name) not in args.only:
            continue
        start = time.time()
        row, failed = train_zoo.check_training(run, first_line, human, args.optimize_net, folder,
                                               args.work, name, manifest["training"][name])
        train_rows.append(row)
        failures += failed
        print(f"zoo: {name} (training): {'ok' if not failed else 'FAILED'} "
              f"({time.time() - start:.1f} s)", file=sys.stderr)
    text = (table(rows) + "\n\n" + memory_table(rows) + "\n\n" +
            train_zoo.training_table(train_rows, human))
    print(text)
    if args.table:
        with open(args.table, "w") as f:
            f.write(text + "\n")
    planned = sum(1 for r in rows if "arena" in r)
    executed = sum(1 for r in rows if r.get("execution", "").startswith(("0", "1", "2", "3",
                                                                          "4", "5", "6", "7",
                                                                          "8", "9")))
    trained = sum(1 for r in train_rows if r.get("status") == "trains")
    print(f"zoo: {len(rows)} models, {planned} planned, {executed} executed to PyTorch's "
          f"outputs; {trained} of {len(train_rows)} trained to PyTorch's gradients; "
          f"{len(failures)} failures")
    for f in failures:
        print("zoo: FAILED " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
