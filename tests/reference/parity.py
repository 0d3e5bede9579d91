#!/usr/bin/env python3
"""Differential test of optimize-net's memonger planners against memonger_ref.py.

    python3 tests/reference/parity.py --optimize-net build/tools/optimize-net --count 500 \\
        --seed 1 [--workdir DIR] [--first N] [--only LABEL,...] [--list-only]

For each random net of caffe2_nets.random_case (case i uses random.Random("<seed>:<i>")) and
each planner/mode below, runs the oracle and the tool on the same net and compares the
optimized nets: the same number of ops, op by op the same type and the same input and output
names, up to a bijection between names `<prefix>__m<k>_shared` (same prefix, any k: Caffe2
numbers DAG buffers in unordered_map order).

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
--static names. A run where the oracle raises (as Caffe2 would) agrees when the tool fails too
("both refused"). In DAG runs whose oracle net fails Caffe2's verify_graph_equality /
verify_inplace_blobs (asserted by share_grad_blobs and optimize_inference_for_dag: memonger's
per-name bookkeeping can turn a second writer into an in-place op), the tool may either fail
("both refused") or write a net, which is compared; such runs are counted ("verifier fails").

Each disagreement is saved under WORKDIR/disagreements/<label>/<case>/ (the net, the case as
JSON, both outputs or the tool's stderr, the command) and printed on one line. Exit status: 0
when every run agrees, 1 otherwise. --list-only writes the nets (WORKDIR/nets/<case>.pbtxt and
.json), checks that they are well formed, and runs nothing.
"""

import argparse
import json
import math
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import caffe2_nets  # noqa: E402
import memonger_ref as m  # noqa: E402

SHARED = re.compile(r"^(.*)__m(\d+)_shared$")


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


def case_json(case):
    return json.dumps(case, indent=1, sort_keys=True)


def write_case(case, directory):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "%s.pbtxt" % case["id"])
    with open(path, "w") as f:
        f.write(caffe2_nets.write_pbtxt(case["net"], case["dtypes"]))
    with open(os.path.join(directory, "%s.json" % case["id"]), "w") as f:
        f.write(case_json(case))
    return path


def run_tool(tool, net_path, flags, out_path, timeout):
    """(net or None, command line, error text)."""
    cmd = [tool, net_path] + flags + ["--net-out", out_path]
    if os.path.exists(out_path):
        os.remove(out_path)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, cmd, "timed out after %ss" % timeout
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or proc.stdout.strip() or "(no output)").splitlines()
        return None, cmd, "exit %d: %s" % (proc.returncode, lines[-1] if lines else "")
    try:
        with open(out_path) as f:
            return caffe2_nets.parse_pbtxt(f.read()), cmd, ""
    except (OSError, ValueError, KeyError, IndexError) as e:
        return None, cmd, "unreadable --net-out: %s" % e


def save_disagreement(workdir, label, case, cmd, oracle_text, tool_out_path, tool_error):
    d = os.path.join(workdir, "disagreements", label, case["id"])
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "net.pbtxt"), "w") as f:
        f.write(caffe2_nets.write_pbtxt(case["net"], case["dtypes"]))
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
    p.add_argument("--list-only", action="store_true", help="write the nets, run nothing")
    args = p.parse_args(argv)
    if not args.list_only and not args.optimize_net:
        p.error("--optimize-net is required unless --list-only")
    workdir = args.workdir or tempfile.mkdtemp(prefix="memonger-parity-")
    os.makedirs(workdir, exist_ok=True)
    only = args.only.split(",") if args.only else None

    cases = [caffe2_nets.random_case(random.Random("%d:%d" % (args.seed, i)),
                                     "case%05d" % i)
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

    stats = {}  # label -> counters
    lines = []
    scratch = os.path.join(workdir, "scratch")
    os.makedirs(scratch, exist_ok=True)
    for case in cases:
        net_path = write_case(case, os.path.join(workdir, "nets"))
        for label, flags, oracle, is_dag in runs_for(case, args.dp_max_blobs):
            if only and not any(label == o or label.startswith(o) for o in only):
                continue
            s = stats.setdefault(label, {"agreed": 0, "disagreed": 0, "both refused": 0,
                                         "verifier fails": 0})
            try:
                oracle_net, _ = oracle()
                oracle_text = caffe2_nets.write_pbtxt(oracle_net)
                refused = None
            except (m.MemongerError, ValueError, AssertionError) as e:
                oracle_net, oracle_text, refused = None, "", "%s: %s" % (type(e).__name__, e)
            verifier_fails = oracle_net is not None and is_dag and not (
                m.verify_graph_equality(case["net"], oracle_net)
                and m.verify_inplace_blobs(case["net"], oracle_net))
            s["verifier fails"] += verifier_fails
            out_path = os.path.join(scratch, "%s.%s.pbtxt" % (case["id"], label))
            tool_net, cmd, error = run_tool(args.optimize_net, net_path, flags, out_path,
                                            args.timeout)
            if tool_net is None and (refused is not None or verifier_fails):
                s["both refused"] += 1
                continue
            if refused is not None:
                diff = "oracle raised %s; the tool wrote a net" % refused
            elif tool_net is None:
                diff = "tool failed: %s" % error
            else:
                diff = first_difference(oracle_net, tool_net)
            if diff is None:
                s["agreed"] += 1
                continue
            s["disagreed"] += 1
            where = save_disagreement(workdir, label, case, cmd,
                                      oracle_text or "# oracle raised: %s\n" % refused,
                                      out_path, error)
            lines.append("%s %s: %s  [%s]" % (case["id"], label, diff, where))

    for line in lines:
        print(line)
    width = max([len(k) for k in stats] + [12])
    print("%-*s %8s %10s %13s %15s" % (width, "planner/mode", "agreed", "disagreed",
                                       "both refused", "verifier fails"))
    for label in sorted(stats):
        s = stats[label]
        print("%-*s %8d %10d %13d %15d" % (width, label, s["agreed"], s["disagreed"],
                                           s["both refused"], s["verifier fails"]))
    print("workdir: %s" % workdir)
    return 1 if any(s["disagreed"] for s in stats.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
