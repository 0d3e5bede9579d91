#!/usr/bin/env python3
"""Differential test of optimize-net's memonger planners against memonger_ref.py.

    python3 tests/reference/parity.py --optimize-net build/tools/optimize-net --count 500 \\
        --seed 1 [--workdir DIR] [--first N] [--only LABEL,...] [--single-device] [--list-only]

For each random net of caffe2_nets.random_case (case i uses random.Random("<seed>:<i>")) and
each planner/mode below, runs the oracle and the tool on the same net and compares the
optimized nets: the same number of ops, op by op the same type and the same input and output
names, up to a bijection between names `<prefix>__m<k>_shared` (same prefix, any k: Caffe2
numbers DAG buffers in unordered_map order). Every tool run gets `--alignment 1`: Caffe2
compares raw sizes, and the tool's default 256-byte alignment makes ties Caffe2 never sees.

    label                         oracle (memonger_ref)        tool flags
    dag-training[+act][+shapes]   share_grad_blobs             --planner memonger-dag
        --mode training --loss.. [--namescope NS] [--share-activations] [--dont-share..]
        --param-grad.. [--input-shape NAME=D0,D1..]
    dag-inference                 optimize_inference_for_dag   --planner memonger-dag
        --mode inference --head.. [--namescope NS]
    greedy[+shapes], dp[+shapes]  optimize_interference        --planner memonger-greedy or
        memonger-dp [--static..] [--input-shape..]   (net's op order; sizes in bytes)
    fast                          optimize_inference_fast      --planner memonger-fast
        [--static..]

Training modes run on training nets; the others on every net (dp only with at most
--dp-max-blobs non-static blobs: memonger's DP is exponential). The static set of the linear
planners is the external inputs and outputs (the tool adds them itself) plus the case's
--static names. --single-device generates only nets whose ops all run on one device (CPU 0 or
one GPU: no cross-device sharing can arise, but on a GPU Caffe2's DAG training still takes the
forward activations for CPU 0 and so never lends them to a GPU gradient).

Each run counts in exactly one column (see LEGEND): agreed; both refused (the oracle raised, as
Caffe2 would, and the tool failed too); one of the documented deviations of the tool from
Caffe2 (DEVIATIONS; see classify_deviation; a run where the tool failed is one only if the tool
accepts the net itself, with --planner none); or disagreed. Deviations are saved under
WORKDIR/deviations/<kind>/<label>/<case>/, plain disagreements under
WORKDIR/disagreements/<label>/<case>/ (the net, the case as JSON, both outputs or the tool's
stderr, the command; deviations also deviation.txt) and printed on one line. Exit status: 0
when no run is a plain disagreement, 1 otherwise. --list-only writes the nets
(WORKDIR/nets/<case>.pbtxt and .json), checks that they are well formed, and runs nothing.
"""

import argparse
import json
import math
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import caffe2_nets  # noqa: E402
import memonger_ref as m  # noqa: E402

SHARED = re.compile(r"^(.*)__m(\d+)_shared$")

# Flags every tool run gets: Caffe2 compares raw sizes (the tool aligns to 256 bytes by default).
COMMON_FLAGS = ["--alignment", "1"]

# Documented, deliberate deviations of the tool from Caffe2, in the order classify_deviation
# tries them (a run counts in the first that applies), with the legend's text.
DEVIATIONS = [
    ("dag-net-fast", "fast on a net of type dag: Caffe2 returns it unchanged; the tool "
     "refuses (a dag net defaults to the parallel execution model)"),
    ("caffe2-verifier", "DAG run whose oracle net fails verify_graph_equality or "
     "verify_inplace_blobs (Caffe2 itself would raise); the tool differs or refuses"),
    ("cross-device", "the oracle's net gives blobs of two devices one name (Caffe2's "
     "greedy/dp/fast ignore devices; its DAG training takes activations for CPU 0); the tool "
     "never shares memory across devices"),
]

LEGEND = [
    ("agreed", "the tool's net equals the oracle's (up to the __m<k>_shared numbering)"),
    ("both refused", "the oracle raised (as Caffe2 would) and the tool failed too"),
] + DEVIATIONS + [
    ("disagreed", "anything else, such as a tool that rejects the net itself (--planner "
     "none): a real difference, printed above (exit status 1)"),
]


def shape_flags(case):
    flags = []
    for name in case["net"]["external_input"]:
        flags += ["--input-shape", "%s=%s" % (name, ",".join(map(str, case["shapes"][name])))]
    return flags


def byte_sizes(case):
    return {b: m.DTYPE_BYTES[case["dtypes"][b]] * math.prod(d)
            for b, d in case["shapes"].items()}


def runs_for(case, dp_max_blobs):
    """(label, tool flags, oracle thunk returning (net, renames), is_dag) for each mode."""
    net = case["net"]
    runs = []
    ns = ["--namescope", case["namescope"]] if case["namescope"] else []
    if case["kind"] == "training":
        for act in (False, True):
            for shapes in (False, True):
                label = "dag-training" + ("+act" if act else "") + ("+shapes" if shapes else "")
                flags = ["--planner", "memonger-dag", "--mode", "training"]
                for loss in case["losses"]:
                    flags += ["--loss", loss]
                flags += ns + (["--share-activations"] if act else [])
                for b in case["dont_share"]:
                    flags += ["--dont-share", b]
                for g in case["param_grads"]:
                    flags += ["--param-grad", g]
                flags += shape_flags(case) if shapes else []
                runs.append((label, flags, lambda act=act, shapes=shapes: m.share_grad_blobs(
                    net, case["losses"], case["param_grads"], case["namescope"],
                    case["dont_share"], act, case["shapes"] if shapes else None,
                    verify=False), True))
    flags = ["--planner", "memonger-dag", "--mode", "inference"]
    for h in case["heads"]:
        flags += ["--head", h]
    runs.append(("dag-inference", flags + ns, lambda: m.optimize_inference_for_dag(
        net, case["heads"], case["namescope"], verify=False), True))

    static = set(net["external_input"]) | set(net["external_output"]) | set(case["static"])
    static_flags = []
    for b in case["static"]:
        static_flags += ["--static", b]
    n_sharable = len([b for b in m.blob_names(net) if b not in static])
    for algo, planner in ((m.GREEDY, "memonger-greedy"), (m.DYNAMIC_PROGRAMMING, "memonger-dp")):
        if algo == m.DYNAMIC_PROGRAMMING and n_sharable > dp_max_blobs:
            continue
        for shapes in (False, True):
            label = algo + ("+shapes" if shapes else "")
            flags = ["--planner", planner] + static_flags + (shape_flags(case) if shapes else [])
            runs.append((label, flags, lambda algo=algo, shapes=shapes: m.optimize_interference(
                net, static, byte_sizes(case) if shapes else None, algo), False))
    runs.append(("fast", ["--planner", "memonger-fast"] + static_flags,
                 lambda: m.optimize_inference_fast(net, static), False))
    return runs


def _names_match(a, b, fwd, bwd):
    """Equal names, or shared names with one prefix that keep the bijection consistent."""
    ma, mb = SHARED.match(a), SHARED.match(b)
    if ma and mb and ma.group(1) == mb.group(1):
        if fwd.setdefault(a, b) != b or bwd.setdefault(b, a) != a:
            return False
        return True
    return a == b and not ma and not mb


def first_difference(oracle, tool):
    """None when the nets agree, else a one-line description of the first differing op."""
    if len(oracle["op"]) != len(tool["op"]):
        return "%d ops (oracle) vs %d ops (tool)" % (len(oracle["op"]), len(tool["op"]))
    fwd, bwd = {}, {}
    for j, (a, b) in enumerate(zip(oracle["op"], tool["op"])):
        if a["type"] != b["type"]:
            return "op %d: type %s (oracle) vs %s (tool)" % (j, a["type"], b["type"])
        for field in ("input", "output"):
            if len(a[field]) != len(b[field]) or not all(
                    _names_match(x, y, fwd, bwd) for x, y in zip(a[field], b[field])):
                return "op %d (%s): %ss %s (oracle) vs %s (tool)" % (
                    j, a["type"], field, a[field], b[field])
    return None


def blob_devices(net):
    """The device of every blob of `net`: the device of the op that first writes it, except
    that CopyGPUToCPU outputs are CPU 0 (Caffe2's own rule); a blob no op writes (an external
    input) takes the device of its first reader (CPU 0 when that reader is CopyCPUToGPU,
    which reads CPU memory)."""
    devices = {}
    for op in net["op"]:
        for b in op["output"]:
            devices.setdefault(b, m.CPU if op["type"] == "CopyGPUToCPU" else m.op_device(op))
    for op in net["op"]:
        for b in op["input"]:
            devices.setdefault(b, m.CPU if op["type"] == "CopyCPUToGPU" else m.op_device(op))
    return devices


def device_name(device):
    """cpu, cuda:<id> (Caffe2's device_type 1) or <type>:<id>."""
    kind, index = device
    return "cpu" if kind == 0 else "%s:%d" % ("cuda" if kind == 1 else str(kind), index)


def cross_device_groups(net, optimized):
    """{name in `optimized`: {device: [blobs of `net`]}} for each name of the optimized net
    that collects original blobs of two or more devices (one buffer on two devices). The nets
    are matched op by op and slot by slot, as every memonger planner only renames."""
    if len(net["op"]) != len(optimized["op"]):
        return {}
    devices = blob_devices(net)
    groups = {}  # optimized name -> {device: [original blobs]}
    for a, b in zip(net["op"], optimized["op"]):
        for field in ("input", "output"):
            for orig, new in zip(a[field], b[field]):
                members = groups.setdefault(new, {}).setdefault(devices[orig], [])
                if orig not in members:
                    members.append(orig)
    return {name: g for name, g in groups.items() if len(g) > 1}


def classify_deviation(label, case, oracle_net, verifier_fails, tool_net, tool_error, is_dag):
    """(kind, explanation) of the documented deviation that explains a run where the tool's
    answer differs from the oracle's net (or the tool failed), else None. The oracle must
    have written a net (a run where it raised is never a deviation)."""
    if oracle_net is None:
        return None
    net = case["net"]
    if (label == "fast" and net.get("type", "") == "dag" and tool_net is None
            and oracle_net["op"] == net["op"] and "parallel" in tool_error.lower()):
        return "dag-net-fast", "the oracle returned the dag net unchanged; the tool: %s" % (
            tool_error.strip().splitlines()[-1] if tool_error.strip() else "")
    if is_dag and verifier_fails:
        return "caffe2-verifier", "the oracle's net fails %s" % " and ".join(
            name for name, ok in (
                ("verify_graph_equality", m.verify_graph_equality(net, oracle_net)),
                ("verify_inplace_blobs", m.verify_inplace_blobs(net, oracle_net))) if not ok)
    groups = cross_device_groups(net, oracle_net)
    if groups:
        return "cross-device", "; ".join(
            "%s holds %s" % (name, ", ".join("%s on %s" % (" ".join(blobs), device_name(dev))
                                             for dev, blobs in sorted(g.items())))
            for name, g in sorted(groups.items()))
    return None


def case_json(case):
    return json.dumps(case, indent=1, sort_keys=True)


def write_case(case, directory):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "%s.pbtxt" % case["id"])
    with open(path, "w") as f:
        f.write(caffe2_nets.write_pbtxt(case["net"]))
    with open(os.path.join(directory, "%s.json" % case["id"]), "w") as f:
        f.write(case_json(case))
    return path


def run_tool(tool, net_path, flags, out_path, timeout):
    """(net or None, command line, error text: "exit N: " and the tool's whole stderr)."""
    cmd = [tool, net_path] + flags + COMMON_FLAGS + ["--net-out", out_path]
    if os.path.exists(out_path):
        os.remove(out_path)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, cmd, "timed out after %ss" % timeout
    if proc.returncode != 0:
        text = proc.stderr.strip() or proc.stdout.strip() or "(no output)"
        return None, cmd, "exit %d: %s" % (proc.returncode, text)
    try:
        with open(out_path) as f:
            return caffe2_nets.parse_pbtxt(f.read()), cmd, ""
    except (OSError, ValueError, KeyError, IndexError) as e:
        return None, cmd, "unreadable --net-out: %s" % e


def net_rejected(tool, net_path, case, timeout):
    """The tool's error when it refuses the net itself (--planner none, every input's shape
    given), else "". A run the tool fails for that reason is never a deviation: the failure
    has nothing to do with how Caffe2 shares."""
    cmd = [tool, net_path, "--planner", "none"] + shape_flags(case) + COMMON_FLAGS
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return ""
    if proc.returncode == 0:
        return ""
    return "exit %d: %s" % (proc.returncode,
                            proc.stderr.strip() or proc.stdout.strip() or "(no output)")


def one_line(error):
    """"exit N: " and the last line of the tool's output."""
    head, _, text = error.partition(": ")
    lines = text.strip().splitlines()
    return "%s: %s" % (head, lines[-1] if lines else "") if text else error


def save_run(directory, case, cmd, oracle_text, tool_out_path, tool_error, note=None):
    """Saves a run for inspection under `directory` (see the module docstring)."""
    d = os.path.join(directory, case["id"])
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "net.pbtxt"), "w") as f:
        f.write(caffe2_nets.write_pbtxt(case["net"]))
    with open(os.path.join(d, "case.json"), "w") as f:
        f.write(case_json(case))
    with open(os.path.join(d, "command.txt"), "w") as f:
        f.write(" ".join(shlex.quote(c) for c in cmd) + "\n")
    with open(os.path.join(d, "oracle.pbtxt"), "w") as f:
        f.write(oracle_text)
    if os.path.exists(tool_out_path):
        with open(tool_out_path) as f, open(os.path.join(d, "tool.pbtxt"), "w") as g:
            g.write(f.read())
    if tool_error:
        with open(os.path.join(d, "tool.error"), "w") as f:
            f.write(tool_error + "\n")
    if note:
        with open(os.path.join(d, "deviation.txt"), "w") as f:
            f.write(note + "\n")
    return d


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--optimize-net", help="path of the optimize-net binary")
    p.add_argument("--count", type=int, default=20, help="number of random nets")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--first", type=int, default=0, help="index of the first case")
    p.add_argument("--workdir", help="default: a new temporary directory")
    p.add_argument("--only", help="comma-separated labels (or label prefixes) to run")
    p.add_argument("--dp-max-blobs", type=int, default=20,
                   help="run dp only on nets with at most this many non-static blobs")
    p.add_argument("--timeout", type=float, default=60, help="seconds per tool run")
    p.add_argument("--single-device", action="store_true",
                   help="generate only nets whose ops all run on one device (no copies)")
    p.add_argument("--list-only", action="store_true", help="write the nets, run nothing")
    args = p.parse_args(argv)
    if not args.list_only and not args.optimize_net:
        p.error("--optimize-net is required unless --list-only")
    workdir = args.workdir or tempfile.mkdtemp(prefix="memonger-parity-")
    os.makedirs(workdir, exist_ok=True)
    only = args.only.split(",") if args.only else None

    cases = [caffe2_nets.random_case(random.Random("%d:%d" % (args.seed, i)),
                                     "case%05d" % i, single_device=args.single_device)
             for i in range(args.first, args.first + args.count)]
    if args.list_only:
        kinds = {}
        for case in cases:
            caffe2_nets.check_well_formed(case)
            write_case(case, os.path.join(workdir, "nets"))
            kinds[case["kind"]] = kinds.get(case["kind"], 0) + 1
        print("wrote %d well-formed nets (%s) under %s" % (
            len(cases), ", ".join("%d %s" % (n, k) for k, n in sorted(kinds.items())),
            os.path.join(workdir, "nets")))
        return 0

    columns = [name for name, _ in LEGEND]
    stats = {}  # label -> {column: count}
    rejected = {}  # case id -> net_rejected(...), computed when first needed
    lines = []
    scratch = os.path.join(workdir, "scratch")
    os.makedirs(scratch, exist_ok=True)
    for stale in ("disagreements", "deviations"):  # a previous run's results
        shutil.rmtree(os.path.join(workdir, stale), ignore_errors=True)
    for case in cases:
        net_path = write_case(case, os.path.join(workdir, "nets"))
        for label, flags, oracle, is_dag in runs_for(case, args.dp_max_blobs):
            if only and not any(label == o or label.startswith(o) for o in only):
                continue
            s = stats.setdefault(label, dict.fromkeys(columns, 0))
            try:
                oracle_net, _ = oracle()
                oracle_text = caffe2_nets.write_pbtxt(oracle_net)
                refused = None
            except (m.MemongerError, ValueError, AssertionError) as e:
                oracle_net, oracle_text, refused = None, "", "%s: %s" % (type(e).__name__, e)
            verifier_fails = oracle_net is not None and is_dag and not (
                m.verify_graph_equality(case["net"], oracle_net)
                and m.verify_inplace_blobs(case["net"], oracle_net))
            out_path = os.path.join(scratch, "%s.%s.pbtxt" % (case["id"], label))
            tool_net, cmd, error = run_tool(args.optimize_net, net_path, flags, out_path,
                                            args.timeout)
            if tool_net is None and refused is not None:
                s["both refused"] += 1
                continue
            if refused is not None:
                diff = "oracle raised %s; the tool wrote a net" % refused
            elif tool_net is None:
                diff = "tool failed: %s" % one_line(error)
            else:
                diff = first_difference(oracle_net, tool_net)
            if diff is None:
                s["agreed"] += 1
                continue
            oracle_text = oracle_text or "# oracle raised: %s\n" % refused
            deviation = classify_deviation(label, case, oracle_net, verifier_fails, tool_net,
                                           error, is_dag)
            if deviation is not None and tool_net is None:
                if case["id"] not in rejected:
                    rejected[case["id"]] = net_rejected(args.optimize_net, net_path, case,
                                                        args.timeout)
                if rejected[case["id"]]:
                    deviation = None
                    diff = "tool rejects the net itself (--planner none): %s" % one_line(
                        rejected[case["id"]])
            if deviation is not None:
                kind, note = deviation
                s[kind] += 1
                save_run(os.path.join(workdir, "deviations", kind, label), case, cmd,
                         oracle_text, out_path, error, "%s: %s\n%s" % (kind, note, diff))
                continue
            s["disagreed"] += 1
            where = save_run(os.path.join(workdir, "disagreements", label), case, cmd,
                             oracle_text, out_path, error)
            lines.append("%s %s: %s  [%s]" % (case["id"], label, diff, where))

    for line in lines:
        print(line)
    width = max([len(k) for k in stats] + [12])
    print("%-*s %s" % (width, "planner/mode", " ".join("%*s" % (max(len(c), 6), c)
                                                       for c in columns)))
    totals = dict.fromkeys(columns, 0)
    for label in sorted(stats):
        print("%-*s %s" % (width, label, " ".join("%*d" % (max(len(c), 6), stats[label][c])
                                                  for c in columns)))
        for c in columns:
            totals[c] += stats[label][c]
    print("%-*s %s" % (width, "total", " ".join("%*d" % (max(len(c), 6), totals[c])
                                                for c in columns)))
    print("columns (each run counts in exactly one):")
    for name, text in LEGEND:
        print("\n".join(textwrap.wrap(text, 100, initial_indent="  %-16s " % name,
                                       subsequent_indent=" " * 19)))
    print("workdir: %s%s" % (workdir, " (deviations under deviations/<kind>/<label>/)"
                             if any(totals[k] for k, _ in DEVIATIONS) else ""))
    return 1 if totals["disagreed"] else 0


if __name__ == "__main__":
    sys.exit(main())
