#!/usr/bin/env python3
"""Differential test of optimize-net's memonger planners against memonger_ref.py.

    python3 tests/reference/parity.py --optimize-net build/tools/optimize-net --count 500 \\
        --seed 1 [--workdir DIR] [--first N] [--only LABEL,...] [--single-device] [--list-only]
        [--max-seconds S]

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
        memonger-dp --execution serial [--static..] [--input-shape..]   (net's op order;
        sizes in bytes; serial whatever the net's type, as optimize_interference plans one
        serial order: a dag net would default the tool to the parallel model)
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
Caffe2 (DEVIATIONS, tried in that order, the first that applies wins; see classify_deviation
for the test that proves each: dag-net-fast, caffe2-verifier, cross-device, activation-device,
dont-share, dont-share+activation-device, caffe2-unsafe, parallel-model, last-write,
version-countdown; a run where the tool failed is one only if the tool accepts the net itself,
with --planner none, and never one of the last seven, which need the tool's net); or disagreed.
The three last ones re-run a side with one documented rule of the tool switched:
  parallel-model  the tool planned for a parallel executor (the net's type is dag, async_dag,
                  async_scheduling, async_polling or prof_dag and the run passes no
                  --execution, or it passes --execution parallel) and the tool re-run with
                  --execution serial equals the oracle (DAG training: or the oracle with
                  real_devices=True). The parallel model orders ops by data dependencies only:
                  no write-after-write edge between two writers of one name, forward readers
                  of activations ordered by their dependencies alone, so it keeps unordered
                  rewrites of a name apart and waits for untraced touchers; Caffe2's executor
                  orders by names.
  last-write      the oracle with memonger_ref's keep_until_last_write=True (a blob is not
                  free before the last write of its name as well as its last read) equals the
                  tool. Combinations allowed, in this order: alone; in DAG training with
                  real_devices=True; without dont_share names on both sides (where the case
                  has some); both of those; and, where parallel-model's condition holds,
                  against the tool re-run with --execution serial, alone or with
                  real_devices=True. deviation.txt names the combination.
  version-countdown  (DAG planners only) the oracle with memonger_ref's
                  count_down_own_version=True (a write of a blob counts down only the consumers
                  whose in-degree counted that write, the readers of the version it writes and
                  of later versions, instead of every consumer of the name; docs/memonger.md,
                  "Which consumers a write counts down") equals the tool. Combinations: each of
                  last-write's (alone; real_devices; no dont_share; both; serial; serial and
                  real_devices), first without, then with keep_until_last_write=True.
                  deviation.txt names the combination.
Deviations are saved under WORKDIR/deviations/<kind>/<label>/<case>/, plain disagreements
under WORKDIR/disagreements/<label>/<case>/ (the net, the case as JSON, both outputs or the
tool's stderr, the command; the re-runs a test made: oracle-real-devices.pbtxt,
oracle-no-dont-share.pbtxt, tool-no-dont-share.pbtxt, command-no-dont-share.txt,
oracle-no-dont-share-real-devices.pbtxt, tool-serial.pbtxt, command-serial.txt,
oracle-last-write[-no-dont-share][-real-devices].pbtxt,
oracle-version-countdown[-last-write][-no-dont-share][-real-devices].pbtxt; deviations also
deviation.txt) and
printed on one line.

The run ends with the table, the legend and one summary line, `parity: N runs, A agreed, D
documented deviations, X disagreed` (N also counts the both-refused runs). --max-seconds S (a
CI guard) starts no new case once S seconds have passed since the first case and then says how
many cases ran; the table and summary cover those. Exit status: 0 when no run is a plain
disagreement, 1 otherwise (with --max-seconds too). --list-only writes the nets
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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import caffe2_nets  # noqa: E402
import memonger_ref as m  # noqa: E402

SHARED = re.compile(r"^(.*)__m(\d+)_shared$")

# Flags every tool run gets: Caffe2 compares raw sizes (the tool aligns to 256 bytes by default).
COMMON_FLAGS = ["--alignment", "1"]

# Net types the tool plans for a parallel executor unless --execution says otherwise (as
# graph/net_def.cc reads a NetDef's type).
PARALLEL_NET_TYPES = ("dag", "async_dag", "async_scheduling", "async_polling", "prof_dag")


def plans_parallel(net, flags):
    """Whether the tool, given `flags`, plans `net` for a parallel executor: the last
    --execution flag when there is one, else the net's type."""
    execution = [flags[i + 1] for i, f in enumerate(flags[:-1]) if f == "--execution"]
    if execution:
        return execution[-1] == "parallel"
    return net.get("type", "") in PARALLEL_NET_TYPES


def serial_flags(flags):
    """`flags` with every --execution flag replaced by one --execution serial."""
    out = []
    i = 0
    while i < len(flags):
        if flags[i] == "--execution" and i + 1 < len(flags):
            i += 2
            continue
        out.append(flags[i])
        i += 1
    return out + ["--execution", "serial"]

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
    ("activation-device", "DAG training: Caffe2 records the blobs no traversed gradient op "
     "writes (forward activations) as CPU 0, the tool uses their real device; the oracle with "
     "real_devices=True equals the tool's net (and the difference is not cross-device)"),
    ("dont-share", "DAG training: the tool never shares a --dont-share name, Caffe2 only keeps "
     "its own buffer out of the pool; the oracle and the tool, both re-run without any "
     "dont_share name, agree"),
    ("dont-share+activation-device", "DAG training where neither test alone applies, "
     "but both deviations undone at once (no dont_share names on both sides, the oracle with "
     "real_devices=True) make the oracle and the tool agree"),
    ("caffe2-unsafe", "the oracle's net, run serially in its op order, reads a value another "
     "write clobbered (Caffe2's answer corrupts memory); the tool's net, simulated the same "
     "way, reads none"),
    ("parallel-model", "the tool planned for a parallel executor (a net of type dag or async_* "
     "and no --execution flag, or --execution parallel), and the tool re-run with --execution "
     "serial equals the oracle (in DAG training: or the oracle with real_devices=True). The "
     "parallel model orders ops only by data dependencies: it has no write-after-write edge "
     "between two writers of one name and orders the forward readers of activations by their "
     "dependencies alone, so it keeps unordered rewrites of a name in separate buffers and "
     "waits for untraced touchers (ops outside the traversal) to happen before a reuse; "
     "Caffe2's executor orders ops by names"),
    ("last-write", "the tool keeps a blob until the last write of its name as well as its last "
     "read (a name written again after its last read stays live until that write), Caffe2 "
     "frees it at its last read; the oracle with keep_until_last_write=True equals the tool "
     "(alone or, in DAG training, combined with the real_devices, no-dont_share or both "
     "variants; or against the tool re-run with --execution serial, alone or with "
     "real_devices, where the run is parallel-model's; the note names the combination)"),
    ("version-countdown", "DAG planners: a write of a blob counts down, in the tool, only the "
     "consumers whose in-degree counted that write (readers of the version it writes and of "
     "later versions), in Caffe2 every consumer of the name; the oracle with "
     "count_down_own_version=True equals the tool (alone or with any of last-write's "
     "combinations, without and then with keep_until_last_write=True; the note names the "
     "combination)"),
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


class Run:
    """One planner/mode on one case: `flags` for the tool, `oracle()` -> (net, renames), and
    the variants the deviation tests re-run (only where they apply):
      no_dont_share: (tool flags, oracle thunk, oracle thunk with real_devices=True) of the
        same run without any dont_share name;
      real_devices: oracle thunk of the same run with memonger_ref's real_devices=True;
      last_write(real_devices=False, no_dont_share=False): oracle thunk of the same run with
        memonger_ref's keep_until_last_write=True (and those variants, where they apply);
      version_countdown(real_devices=False, no_dont_share=False, last_write=False): oracle
        thunk of the same DAG run with memonger_ref's count_down_own_version=True (and those
        variants, where they apply)."""

    def __init__(self, label, flags, oracle, is_dag, no_dont_share=None, real_devices=None,
                 last_write=None, version_countdown=None):
        self.label = label
        self.flags = flags
        self.oracle = oracle
        self.is_dag = is_dag
        self.no_dont_share = no_dont_share
        self.real_devices = real_devices
        self.last_write = last_write
        self.version_countdown = version_countdown


def _training_run(case, act, shapes):
    net = case["net"]
    label = "dag-training" + ("+act" if act else "") + ("+shapes" if shapes else "")

    def flags(dont_share):
        f = ["--planner", "memonger-dag", "--mode", "training"]
        for loss in case["losses"]:
            f += ["--loss", loss]
        f += ["--namescope", case["namescope"]] if case["namescope"] else []
        f += ["--share-activations"] if act else []
        for b in dont_share:
            f += ["--dont-share", b]
        for g in case["param_grads"]:
            f += ["--param-grad", g]
        return f + (shape_flags(case) if shapes else [])

    def oracle(dont_share, real_devices=False, last_write=False, count_down=False):
        return lambda: m.share_grad_blobs(
            net, case["losses"], case["param_grads"], case["namescope"], dont_share, act,
            case["shapes"] if shapes else None, verify=False, real_devices=real_devices,
            keep_until_last_write=last_write, count_down_own_version=count_down)

    dont_share = list(case["dont_share"])
    return Run(label, flags(dont_share), oracle(dont_share), True,
               no_dont_share=((flags([]), oracle([]), oracle([], real_devices=True))
                              if dont_share else None),
               real_devices=oracle(dont_share, real_devices=True),
               last_write=lambda real_devices=False, no_dont_share=False: oracle(
                   [] if no_dont_share else dont_share, real_devices, last_write=True),
               version_countdown=lambda real_devices=False, no_dont_share=False,
               last_write=False: oracle([] if no_dont_share else dont_share, real_devices,
                                        last_write, count_down=True))


def runs_for(case, dp_max_blobs):
    """The Run of each planner/mode that applies to `case`."""
    net = case["net"]
    runs = []
    ns = ["--namescope", case["namescope"]] if case["namescope"] else []
    if case["kind"] == "training":
        for act in (False, True):
            for shapes in (False, True):
                runs.append(_training_run(case, act, shapes))
    flags = ["--planner", "memonger-dag", "--mode", "inference"]
    for h in case["heads"]:
        flags += ["--head", h]
    runs.append(Run("dag-inference", flags + ns, lambda: m.optimize_inference_for_dag(
        net, case["heads"], case["namescope"], verify=False), True,
        last_write=lambda: lambda: m.optimize_inference_for_dag(
            net, case["heads"], case["namescope"], verify=False, keep_until_last_write=True),
        version_countdown=lambda last_write=False: lambda: m.optimize_inference_for_dag(
            net, case["heads"], case["namescope"], verify=False,
            keep_until_last_write=last_write, count_down_own_version=True)))

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
            # optimize_interference plans one serial order whatever the net's type (the tool
            # defaults a dag net to the parallel model, where these planners refuse).
            flags = (["--planner", planner, "--execution", "serial"] + static_flags
                     + (shape_flags(case) if shapes else []))
            def interference(algo=algo, shapes=shapes, last_write=False):
                return m.optimize_interference(net, static,
                                               byte_sizes(case) if shapes else None, algo,
                                               keep_until_last_write=last_write)
            runs.append(Run(label, flags, interference, False,
                            last_write=lambda f=interference: lambda: f(last_write=True)))
    runs.append(Run("fast", ["--planner", "memonger-fast"] + static_flags,
                    lambda: m.optimize_inference_fast(net, static), False,
                    last_write=lambda: lambda: m.optimize_inference_fast(
                        net, static, keep_until_last_write=True)))
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


def serial_clobbers(net, optimized):
    """The reads of clobbered values when `optimized` (the ops of `net`, renamed slot by slot)
    runs serially in its op order, simulated by name: each physical name holds the last
    original blob version written to it (a name never written holds its own initial value);
    an op reading original blob b (the version `net` itself would read there: its latest
    write so far, or its initial value) through its name in `optimized` must find that very
    version there; every write of any blob to a name replaces what the name held (an op reads
    all its inputs, then writes its outputs). After the last op, each external output is read
    by its own name (the net's caller reads it there). Returns one line per bad read, [] for
    a net that computes what `net` does, or None when the nets cannot be matched slot by slot
    (other op counts, types or arities)."""
    if len(net["op"]) != len(optimized["op"]):
        return None
    for a, b in zip(net["op"], optimized["op"]):
        if (a["type"] != b["type"] or len(a["input"]) != len(b["input"])
                or len(a["output"]) != len(b["output"])):
            return None
    version = {}  # original blob -> writes so far in `net`
    holds = {}  # physical name -> (original blob, its version, index of the op that wrote it)

    def describe(held):
        blob, v, writer = held
        return ("%s (written by op %d)" % (blob, writer) if writer >= 0 else
                "its initial value" if v == 0 else blob)

    bad = []
    for i, (a, b) in enumerate(zip(net["op"], optimized["op"])):
        for orig, name in zip(a["input"], b["input"]):
            want = (orig, version.get(orig, 0))
            held = holds.get(name, (name, 0, -1))
            if held[:2] != want:
                bad.append("op %d (%s) reads %s through %s, which holds %s" % (
                    i, a["type"], orig, name,
                    "its initial value" if held[2] < 0 else describe(held)))
        for orig, name in zip(a["output"], b["output"]):
            version[orig] = version.get(orig, 0) + 1
            holds[name] = (orig, version[orig], i)
    for orig in net["external_output"]:
        want = (orig, version.get(orig, 0))
        held = holds.get(orig, (orig, 0, -1))
        if held[:2] != want:
            bad.append("external output %s ends holding %s" % (
                orig, "its initial value" if held[2] < 0 else describe(held)))
    return bad


def classify_deviation(label, case, oracle_net, verifier_fails, tool_net, tool_error, is_dag,
                       real_devices=None, no_dont_share=None, serial=None, last_write=None,
                       version_countdown=None):
    """(kind, explanation) of the documented deviation that explains a run where the tool's
    answer differs from the oracle's net (or the tool failed), else None. The oracle must
    have written a net (a run where it raised is never a deviation). The tests, in the order
    of DEVIATIONS (the first that applies wins):

      dag-net-fast     fast, a dag net returned unchanged by the oracle, the tool refused it
                       for the parallel model;
      caffe2-verifier  a DAG run whose oracle net fails Caffe2's own verifiers;
      cross-device     the oracle's net gives one name to blobs of two devices.
    The others need the tool's net (a tool that failed is never excused by them):
      activation-device  `real_devices()` (the oracle re-run with real_devices=True) equals
                       the tool's net;
      dont-share       `no_dont_share()` -> (oracle net, tool net, tool error) of the run
                       re-run on both sides without any dont_share name: both wrote a net
                       and the nets are equal;
      dont-share+activation-device  neither of the two alone, but with both undone at once:
                       the oracle without dont_share names and with real_devices=True equals
                       the tool's net without dont_share names;
      caffe2-unsafe    the oracle's net reads a clobbered value when run serially in its op
                       order (serial_clobbers) and the tool's net does not;
      parallel-model   `serial()` -> (tool net, tool error) of the run re-run with
                       --execution serial (a thunk only where the tool planned for a parallel
                       executor, see plans_parallel): it wrote a net equal to the oracle's or
                       to `real_devices()`'s;
      last-write       `last_write(real_devices, no_dont_share)` -> the oracle's net with
                       keep_until_last_write=True (None when it raised) equals the tool's net
                       (no_dont_share: the tool's net without dont_share names, from
                       `no_dont_share()`; serial: the tool's net from `serial()`). The
                       combinations, tried in this order: alone; real_devices; no_dont_share;
                       both; serial; serial and real_devices (real_devices only where
                       `real_devices` is given, no_dont_share only where `no_dont_share` is,
                       serial only where `serial` is).
      version-countdown  `version_countdown(real_devices, no_dont_share, last_write)` -> the
                       oracle's net with count_down_own_version=True (None when it raised)
                       equals the tool's net: last-write's combinations, each first without
                       keep_until_last_write, then all of them again with it.
    `real_devices`, `no_dont_share`, `serial`, `last_write` and `version_countdown` are
    thunks, None where the
    variant does not apply; no_dont_share() -> (oracle net, tool net, tool error, thunk of the
    oracle net without dont_share names and with real_devices=True)."""
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
    if tool_net is None:
        return None
    if real_devices is not None:
        real_net, _ = real_devices()
        if real_net is not None and first_difference(real_net, tool_net) is None:
            return "activation-device", (
                "the oracle with real_devices=True equals the tool's net; blobs no traversed "
                "gradient op writes whose Caffe2 device (CPU 0) is not their real one: %s" % (
                    ", ".join("%s on %s" % (b, device_name(d))
                              for b, d in misrecorded_devices(case, oracle_net, real_net))
                    or "none"))
    plain_tool = None
    if no_dont_share is not None:
        plain_oracle, plain_tool, _, plain_real_devices = no_dont_share()
        if (plain_oracle is not None and plain_tool is not None
                and first_difference(plain_oracle, plain_tool) is None):
            return "dont-share", (
                "without dont_share %s the oracle and the tool agree%s" % (
                    " ".join(case["dont_share"]), renamed_note(net, oracle_net,
                                                               case["dont_share"])))
        if plain_tool is not None and real_devices is not None:
            both = plain_real_devices()
            if both is not None and first_difference(both, plain_tool) is None:
                return "dont-share+activation-device", (
                    "neither alone, but without dont_share %s and with real_devices=True the "
                    "oracle equals the tool's net without dont_share" % " ".join(
                        case["dont_share"]))
    bad = serial_clobbers(net, oracle_net)
    if bad:
        tool_bad = serial_clobbers(net, tool_net)
        if tool_bad == []:
            return "caffe2-unsafe", "the oracle's net, run serially: %s%s" % (
                "; ".join(bad[:3]), " (and %d more)" % (len(bad) - 3) if len(bad) > 3 else "")
    serial_net = None
    if serial is not None:
        serial_net, _ = serial()
        if serial_net is not None:
            wants = [("the oracle's net", lambda: oracle_net)]
            if real_devices is not None:
                wants.append(("the oracle's net with real_devices=True",
                              lambda: real_devices()[0]))
            for what, want in wants:
                want = want()
                if want is not None and first_difference(want, serial_net) is None:
                    return "parallel-model", (
                        "the tool re-run with --execution serial equals %s" % what)
    combos = [("alone", tool_net, {})]
    if real_devices is not None:
        combos.append(("with real_devices=True", tool_net, {"real_devices": True}))
    if no_dont_share is not None and plain_tool is not None:
        combos.append(("without dont_share on both sides", plain_tool,
                       {"no_dont_share": True}))
        if real_devices is not None:
            combos.append(("without dont_share on both sides and with real_devices=True",
                           plain_tool, {"no_dont_share": True, "real_devices": True}))
    if serial_net is not None:
        combos.append(("against the tool re-run with --execution serial", serial_net, {}))
        if real_devices is not None:
            combos.append(("with real_devices=True, against the tool re-run with "
                           "--execution serial", serial_net, {"real_devices": True}))
    if last_write is not None:
        for what, tool_side, options in combos:
            want = last_write(**options)
            if want is not None and first_difference(want, tool_side) is None:
                return "last-write", (
                    "the oracle with keep_until_last_write=True (%s) equals the tool; names "
                    "written again after their last read: %s" % (
                        what, ", ".join(rewritten_after_read(net)) or "none"))
    if version_countdown is not None:
        for lw in (False, True):
            for what, tool_side, options in combos:
                want = version_countdown(last_write=lw, **options)
                if want is not None and first_difference(want, tool_side) is None:
                    return "version-countdown", (
                        "the oracle with count_down_own_version=True (%s%s) equals the tool; "
                        "writes of a name already read (by an earlier op or the writer): "
                        "%s" % (
                            what, ", with keep_until_last_write=True" if lw else "",
                            ", ".join(rewrites_of_read_names(net)) or "none"))
    return None


def rewrites_of_read_names(net):
    """'op <i> <type> writes <name>' for each op writing a name some earlier op (or the op
    itself) reads: the writes whose Caffe2 count-down reaches readers of an earlier
    version."""
    read = set()
    out = []
    for i, op in enumerate(net["op"]):
        read.update(op["input"])
        for b in op["output"]:
            if b in read:
                out.append("op %d %s writes %s" % (i, op["type"], b))
    return out


def rewritten_after_read(net):
    """The names an op writes again (not in place) after a read of an earlier version, in
    order of first such write: where Caffe2's ranges end before the name's last write."""
    read, written, found = set(), set(net["external_input"]), []
    for op in net["op"]:
        read.update(op["input"])
        for b in op["output"]:
            if b in written and b in read and b not in op["input"] and b not in found:
                found.append(b)
        written.update(op["output"])
    return found


def renamed_note(net, optimized, names):
    """"; the oracle renames a -> b, ..." for the blobs of `names` that `optimized` renames
    (a dont_share blob mapped onto a free buffer), else ""."""
    renamed = {}
    for a, b in zip(net["op"], optimized["op"]):
        for field in ("input", "output"):
            for x, y in zip(a[field], b[field]):
                if x in names and x != y:
                    renamed.setdefault(x, y)
    return "; the oracle renames %s" % ", ".join(
        "%s -> %s" % p for p in sorted(renamed.items())) if renamed else ""


def misrecorded_devices(case, *optimized):
    """(blob, real device) of the blobs one of the `optimized` nets renames (or that name a
    shared buffer there) which Caffe2 records as CPU 0 although their writer runs elsewhere:
    blobs no gradient op writes. A hint for the note only; the classification rests on the
    re-run."""
    net = case["net"]
    real = m.real_blob_devices(net["op"])
    touched = set()
    for other in optimized:
        for a, b in zip(net["op"], other["op"]):
            for field in ("input", "output"):
                for x, y in zip(a[field], b[field]):
                    if x != y:
                        touched.update((x, y))
    is_grad = m.grad_blob_predicate(
        case["namescope"] + ("/" if case["namescope"] and not case["namescope"].endswith("/")
                             else ""), case["param_grads"])
    traversed_writes = {b for op in net["op"]
                        if any(is_grad(x) for x in op["input"] + op["output"])
                        for b in op["output"]}
    return sorted((b, real[b]) for b in touched
                  if b in real and b not in traversed_writes and real[b] != m.CPU)


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


def save_run(directory, case, cmd, oracle_text, tool_out_path, tool_error, note=None,
             extra=None):
    """Saves a run for inspection under `directory` (see the module docstring); `extra` maps
    further file names to their text (the re-runs of a deviation test)."""
    d = os.path.join(directory, case["id"])
    os.makedirs(d, exist_ok=True)
    for name, text in (extra or {}).items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
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


def _oracle_or_none(thunk):
    """(net, renames) of an oracle thunk, (None, error text) when it raises."""
    try:
        return thunk()
    except (m.MemongerError, ValueError, AssertionError) as e:
        return None, "%s: %s" % (type(e).__name__, e)


def rerun_real_devices(run, extra):
    """The thunk classify_deviation calls for `real_devices` (None where it does not apply);
    it records the oracle's net in `extra`."""
    if run.real_devices is None:
        return None

    def thunk():
        net, renames = _oracle_or_none(run.real_devices)
        extra["oracle-real-devices.pbtxt"] = (caffe2_nets.write_pbtxt(net) if net is not None
                                              else "# oracle raised: %s\n" % renames)
        return net, renames
    return thunk


def rerun_no_dont_share(run, args, case, net_path, scratch, extra):
    """The thunk classify_deviation calls for `no_dont_share` (None where it does not apply):
    the oracle and the tool without any dont_share name; records both in `extra`."""
    if run.no_dont_share is None:
        return None
    flags, oracle, real_oracle = run.no_dont_share
    done = []

    def real_devices():
        real_net, why = _oracle_or_none(real_oracle)
        extra["oracle-no-dont-share-real-devices.pbtxt"] = (
            caffe2_nets.write_pbtxt(real_net) if real_net is not None
            else "# oracle raised: %s\n" % why)
        return real_net

    def thunk():
        if done:
            return done[0]
        oracle_net, why = _oracle_or_none(oracle)
        extra["oracle-no-dont-share.pbtxt"] = (caffe2_nets.write_pbtxt(oracle_net)
                                               if oracle_net is not None
                                               else "# oracle raised: %s\n" % why)
        out_path = os.path.join(scratch, "%s.%s.no-dont-share.pbtxt" % (case["id"], run.label))
        tool_net, cmd, error = run_tool(args.optimize_net, net_path, flags, out_path,
                                        args.timeout)
        extra["command-no-dont-share.txt"] = " ".join(shlex.quote(c) for c in cmd) + "\n"
        extra["tool-no-dont-share.pbtxt"] = (caffe2_nets.write_pbtxt(tool_net)
                                             if tool_net is not None
                                             else "# tool failed: %s\n" % error)
        done.append((oracle_net, tool_net, error, real_devices))
        return done[0]
    return thunk


def rerun_serial(run, args, case, net_path, scratch, extra):
    """The thunk classify_deviation calls for `serial` (None unless the tool planned the run
    for a parallel executor): the tool re-run with --execution serial; records it in
    `extra`."""
    if not plans_parallel(case["net"], run.flags):
        return None
    done = []

    def thunk():
        if not done:
            out_path = os.path.join(scratch, "%s.%s.serial.pbtxt" % (case["id"], run.label))
            tool_net, cmd, error = run_tool(args.optimize_net, net_path,
                                            serial_flags(run.flags), out_path, args.timeout)
            extra["command-serial.txt"] = " ".join(shlex.quote(c) for c in cmd) + "\n"
            extra["tool-serial.pbtxt"] = (caffe2_nets.write_pbtxt(tool_net)
                                          if tool_net is not None
                                          else "# tool failed: %s\n" % error)
            done.append((tool_net, error))
        return done[0]
    return thunk


def rerun_last_write(run, extra):
    """The function classify_deviation calls for `last_write` (None where the run has no such
    variant): (real_devices=False, no_dont_share=False) -> the oracle's net with
    keep_until_last_write=True, or None when it raised; records each in `extra`."""
    if run.last_write is None:
        return None

    def call(real_devices=False, no_dont_share=False):
        options = {}
        if real_devices:
            options["real_devices"] = True
        if no_dont_share:
            options["no_dont_share"] = True
        net, why = _oracle_or_none(run.last_write(**options))
        name = "oracle-last-write%s%s.pbtxt" % ("-no-dont-share" if no_dont_share else "",
                                                "-real-devices" if real_devices else "")
        extra[name] = (caffe2_nets.write_pbtxt(net) if net is not None
                       else "# oracle raised: %s\n" % why)
        return net
    return call


def rerun_version_countdown(run, extra):
    """The function classify_deviation calls for `version_countdown` (None where the run has
    no such variant): (real_devices=False, no_dont_share=False, last_write=False) -> the
    oracle's net with count_down_own_version=True, or None when it raised; records each in
    `extra`."""
    if run.version_countdown is None:
        return None

    def call(real_devices=False, no_dont_share=False, last_write=False):
        options = {}
        for key, value in (("real_devices", real_devices), ("no_dont_share", no_dont_share),
                           ("last_write", last_write)):
            if value:
                options[key] = True
        net, why = _oracle_or_none(run.version_countdown(**options))
        name = "oracle-version-countdown%s%s%s.pbtxt" % (
            "-last-write" if last_write else "", "-no-dont-share" if no_dont_share else "",
            "-real-devices" if real_devices else "")
        extra[name] = (caffe2_nets.write_pbtxt(net) if net is not None
                       else "# oracle raised: %s\n" % why)
        return net
    return call


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
    p.add_argument("--max-seconds", type=float, default=None,
                   help="start no new case after this many seconds (a CI guard); the summary "
                   "says how many cases ran")
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
    exact_stats = {}  # label -> {"exact": n, "different": n}: the tool with --caffe2-bugs
    exact_lines = []
    rejected = {}  # case id -> net_rejected(...), computed when first needed
    lines = []
    scratch = os.path.join(workdir, "scratch")
    os.makedirs(scratch, exist_ok=True)
    for stale in ("disagreements", "deviations", "exact-differences"):  # a previous run's
        shutil.rmtree(os.path.join(workdir, stale), ignore_errors=True)
    started = time.monotonic()
    cases_run = 0
    for case in cases:
        if args.max_seconds is not None and time.monotonic() - started >= args.max_seconds:
            break
        cases_run += 1
        net_path = write_case(case, os.path.join(workdir, "nets"))
        for run in runs_for(case, args.dp_max_blobs):
            label, flags, oracle, is_dag = run.label, run.flags, run.oracle, run.is_dag
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
            check_exact(args, case, label, net_path, flags, scratch, workdir,
                        None if refused is not None or verifier_fails else oracle_net,
                        oracle_text, exact_stats, exact_lines)
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
            extra = {}  # files of the re-runs, saved with the run
            deviation = classify_deviation(
                label, case, oracle_net, verifier_fails, tool_net, error, is_dag,
                real_devices=rerun_real_devices(run, extra),
                no_dont_share=rerun_no_dont_share(run, args, case, net_path, scratch, extra),
                serial=rerun_serial(run, args, case, net_path, scratch, extra),
                last_write=rerun_last_write(run, extra),
                version_countdown=rerun_version_countdown(run, extra))
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
                         oracle_text, out_path, error, "%s: %s\n%s" % (kind, note, diff),
                         extra)
                continue
            s["disagreed"] += 1
            where = save_run(os.path.join(workdir, "disagreements", label), case, cmd,
                             oracle_text, out_path, error, extra=extra)
            lines.append("%s %s: %s  [%s]" % (case["id"], label, diff, where))

    for line in lines + exact_lines:
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
    name_width = max(len(name) for name, _ in LEGEND)
    for name, text in LEGEND:
        print("\n".join(textwrap.wrap(text, 100, initial_indent="  %-*s " % (name_width, name),
                                       subsequent_indent=" " * (name_width + 3))))
    print("workdir: %s%s" % (workdir, " (deviations under deviations/<kind>/<label>/)"
                             if any(totals[k] for k, _ in DEVIATIONS) else ""))
    if cases_run < len(cases):
        print("--max-seconds %g: stopped after %d of %d cases%s, %.1f s" % (
            args.max_seconds, cases_run, len(cases),
            " (%s to %s)" % (cases[0]["id"], cases[cases_run - 1]["id"]) if cases_run else "",
            time.monotonic() - started))
    print("with --caffe2-bugs (Caffe2's answer exactly; both refusing counts as exact):")
    for label in sorted(exact_stats):
        print("  %-*s %5d exact %5d different" % (width, label, exact_stats[label]["exact"],
                                                   exact_stats[label]["different"]))
    exact = {k: sum(e[k] for e in exact_stats.values()) for k in ("exact", "different")}
    print(summary_line(totals, exact))
    return 1 if totals["disagreed"] or exact["different"] else 0


def summary_line(totals, exact):
    """parity: N runs, A agreed, D documented deviations, X disagreed (both-refused runs count
    in N only); caffe2-bugs: M runs, E exact, Y different."""
    return ("parity: %d runs, %d agreed, %d documented deviations, %d disagreed; "
            "caffe2-bugs: %d runs, %d exact, %d different") % (
        sum(totals.values()), totals["agreed"], sum(totals[k] for k, _ in DEVIATIONS),
        totals["disagreed"], exact["exact"] + exact["different"], exact["exact"],
        exact["different"])


def check_exact(args, case, label, net_path, flags, scratch, workdir, expected, oracle_text,
                exact_stats, exact_lines):
    """The tool with --caffe2-bugs against the oracle as Caffe2 runs it (`expected`: the
    oracle's net, or None where Caffe2 raised, its own verifiers included): the same net up to
    the numbering of __m<k>_shared, or both refusing. A difference is saved under
    exact-differences/<label>/<case>."""
    out_path = os.path.join(scratch, "%s.%s.exact.pbtxt" % (case["id"], label))
    tool_net, cmd, error = run_tool(args.optimize_net, net_path, flags + ["--caffe2-bugs"],
                                    out_path, args.timeout)
    s = exact_stats.setdefault(label, {"exact": 0, "different": 0})
    if expected is None and tool_net is None:
        s["exact"] += 1
        return
    if expected is None:
        diff = "Caffe2 raises here; the tool wrote a net"
    elif tool_net is None:
        diff = "tool failed: %s" % one_line(error)
    else:
        diff = first_difference(expected, tool_net)
    if diff is None:
        s["exact"] += 1
        return
    s["different"] += 1
    where = save_run(os.path.join(workdir, "exact-differences", label), case, cmd,
                     oracle_text or "# Caffe2 raises\n", out_path, error)
    exact_lines.append("%s %s --caffe2-bugs: %s  [%s]" % (case["id"], label, diff, where))


if __name__ == "__main__":
    sys.exit(main())
