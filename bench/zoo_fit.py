#!/usr/bin/python3
"""The zoo trained under `--fit`: for each model, its inference export with its first output the
loss, the largest batch (or the size named) that fits a budget for each cure, what recompute
reruns there, and the search's wall time, best of `--rounds` runs (the host is shared).

  /usr/bin/python3 bench/zoo_fit.py --optimize-net build/tools/optimize-net \\
      --cache ~/.cache/memonger/zoo/HASH [--only densenet121] [--rounds 3]

Prints the markdown table of BENCHMARKS.md's "Largest size that fits".
"""
import argparse
import json
import os
import subprocess
import time

# (model, budget, symbol searched, other flags): the rows of BENCHMARKS.md.
ROWS = [
    ("resnet18", "4GiB", "batch", []),
    ("resnet50", "8GiB", "batch", []),
    ("mobilenet_v3_small", "4GiB", "batch", []),
    ("squeezenet1_1", "4GiB", "batch", []),
    ("densenet121", "8GiB", "batch", []),
    ("lraspp_mobilenet_v3_large", "4GiB", "batch", []),
    ("unet", "4GiB", "batch", []),
    ("efficientnet_b0", "8GiB", "batch", []),
    ("convnext_tiny", "8GiB", "batch", []),
    ("vit_small", "4GiB", "batch", []),
    ("text_encoder", "4GiB", "batch", ["--dim", "seq=128"]),
    ("bert_like", "4GiB", "batch", ["--dim", "seq=96"]),
    ("gpt_decoder", "4GiB", "seq", []),
    ("alibi_encoder", "4GiB", "n", []),
    ("mlp", "1GiB", "batch", []),
]


def fit(binary, cache, info, budget, symbol, flags):
    cmd = [binary, os.path.join(cache, info["file"]), "--mode", "training", "--loss",
           info["outputs"][0], "--fit", symbol, "--budget", budget, "--format", "json", *flags]
    start = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if run.returncode not in (0, 3):
        raise RuntimeError(f"{' '.join(cmd)}: {run.stderr.strip()[:300]}")
    return json.loads(run.stdout)["fit"], seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimize-net", required=True)
    parser.add_argument("--cache", required=True, help="the zoo's export folder (manifest.json)")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with open(os.path.join(args.cache, "manifest.json")) as f:
        manifest = json.load(f)["models"]
    print("|model|budget|given|memory-aware|recompute|rerun there: ops, extra FLOPs|`--fit` time|")
    print("|---|---:|---:|---:|---:|---|---:|")
    for name, budget, symbol, flags in ROWS:
        if args.only and name not in args.only:
            continue
        info = manifest.get(name)
        if info is None or "file" not in info:
            print(f"|{name}|{budget}|(not exported)|||||")
            continue
        best = None
        for _ in range(args.rounds):
            result, seconds = fit(args.optimize_net, args.cache, info, budget, symbol, flags)
            best = seconds if best is None else min(best, seconds)
        cures = {c["cure"]: c for c in result["cures"]}
        given = cures.get("given", {}).get("largest")
        aware = cures.get("memory-aware", {}).get("largest")
        rec = cures.get("recompute", {})
        rerun = "none"
        if rec.get("recomputed_ops"):
            share = 100.0 * rec["extra_flops"] / max(1, rec["forward_flops"])
            rerun = f"{rec['recomputed_ops']}, +{share:.1f}%"
        label = name if symbol == "batch" else f"{name} ({symbol})"
        print(f"|{label}|{budget.replace('GiB', ' GiB')}|{given}|{aware}|{rec.get('largest')}|"
              f"{rerun}|{best:.1f} s|")


if __name__ == "__main__":
    main()
