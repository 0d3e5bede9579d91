#!/usr/bin/python3
"""The attention workload's forward pass in eager PyTorch beside our plan of it.

  /usr/bin/python3 bench/peers/attention_eager.py --optimize-net build/tools/optimize-net \
      [--n 1023 2047] [--depth 2]

Writes the ops of workloads/workload_attention.h (math kernel, fp32, an ALiBi-shaped fp32
bias made in the pass and kept to its end) as a PyTorch user writes them: LayerNorm, the QKV
product with its bias added in place, the head split as views, q and kT scaled in place,
scores with the bias added in place, softmax, the products, the MLP with GELU, the residuals.
Eager PyTorch's peak is the profiler's (allocations during one no-grad pass after a warm-up,
as tests/zoo/export_zoo.py measures the zoo); ours is the arena of
`--workload attention:...,dtype=fp32,kernel=math,bias_dtype=fp32` without the graph input x.
Prints one markdown row per variant (with and without in-place reuse and views).
"""

import argparse
import json
import math
import subprocess


def eager_peak(n, depth, dim=768, heads=12, mlp=3072):
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    L, d = n + 1, dim // heads
    x = torch.randn(1, L, dim)
    blocks = []
    for _ in range(depth):
        blocks.append({k: torch.randn(*s) * 0.02 for k, s in {
            "ln1_w": (dim,), "ln1_b": (dim,), "wqkv": (dim, 3 * dim), "bqkv": (3 * dim,),
            "wproj": (dim, dim), "bproj": (dim,), "ln2_w": (dim,), "ln2_b": (dim,),
            "wfc1": (dim, mlp), "bfc1": (mlp,), "wfc2": (mlp, dim), "bfc2": (dim,)}.items()})
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)])
    coords = torch.randn(L, 2)

    def forward(x):
        # The bias, [1, H, L, L], made once and read by every block (AlibiBias).
        dist = torch.cdist(coords, coords)
        bias = (-slopes.view(heads, 1, 1) * dist).unsqueeze(0)
        del dist
        s = math.sqrt(1.0 / math.sqrt(d))
        for p in blocks:
            ln1 = F.layer_norm(x, (dim,), p["ln1_w"], p["ln1_b"])
            qkv = ln1 @ p["wqkv"]
            del ln1
            qkv += p["bqkv"]
            q, k, v = qkv.view(1, L, 3, heads, d).permute(2, 0, 3, 1, 4).unbind(0)
            q = q * s
            kt = k.transpose(-1, -2) * s
            scores = q @ kt
            del q, kt, k
            scores += bias
            probs = scores.softmax(-1)
            del scores
            o = probs @ v
            del probs, v, qkv
            a = o.transpose(1, 2).reshape(1, L, dim)
            del o
            a = a @ p["wproj"]
            a += p["bproj"]
            x1 = x + a
            del a
            ln2 = F.layer_norm(x1, (dim,), p["ln2_w"], p["ln2_b"])
            h = ln2 @ p["wfc1"]
            del ln2
            h += p["bfc1"]
            g = F.gelu(h)
            del h
            m = g @ p["wfc2"]
            del g
            m += p["bfc2"]
            x = x1 + m
            del x1, m
        return x

    with torch.no_grad():
        forward(x)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            y = forward(x)
        del y
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_us())
    held = peak = 0
    for e in events:
        held += e.nbytes()
        peak = max(peak, held)
    return peak


def ours(tool, n, depth, flags):
    spec = f"attention:n={n},depth={depth},dtype=fp32,kernel=math,bias_dtype=fp32"
    out = subprocess.run([tool, "--workload", spec, "--format", "json", *flags],
                         capture_output=True, text=True, check=True).stdout
    plan = json.loads(out)
    inputs = sum(-(-v["bytes"] // 256) * 256 for v in plan["values"]
                 if v["role"] == "input" and v["offset"] is not None)
    return plan["arena_bytes"] - inputs


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--optimize-net", required=True)
    parser.add_argument("--n", type=int, nargs="+", default=[1023, 2047])
    parser.add_argument("--depth", type=int, default=2)
    args = parser.parse_args()
    print("| L | eager PyTorch peak (MB) | ours (MB) | --no-in-place --no-views (MB) | eager / ours |")
    print("|---:|---:|---:|---:|---:|")
    for n in args.n:
        eager = eager_peak(n, args.depth)
        default = ours(args.optimize_net, n, args.depth, [])
        apart = ours(args.optimize_net, n, args.depth, ["--no-in-place", "--no-views"])
        print(f"| {n + 1} | {eager / 1e6:.1f} | {default / 1e6:.1f} | {apart / 1e6:.1f} | "
              f"{eager / default:.2f} |")


if __name__ == "__main__":
    main()
