#!/usr/bin/python3
"""Host executor speed against PyTorch's CPU forward on the model zoo's exports, measured side by
side: for each model, `--rounds` rounds of (one PyTorch forward, one `optimize-net --execute host`
run) after a warm-up of each, the best of each kept. Interleaving keeps a shared machine's load
the same for both; the best of several rounds drops the runs a neighbour slowed.

  /usr/bin/python3 bench/zoo_speed.py --optimize-net build/tools/optimize-net \\
      --cache ~/.cache/memonger/zoo/HASH [--only resnet18 densenet121] [--rounds 5]

Ours: the kernel time the CLI reports (Executor::Run, every core as `--threads` defaults to);
PyTorch's: one `model(*inputs)` under no_grad with torch's default threads (every core). The
models are rebuilt from tests/zoo/export_zoo.py with the export's seeds, so the inputs are the
export's. Prints a markdown table: model, ours, PyTorch, ours / PyTorch; with `--zoo-table`
(the table `ctest -R ModelZoo` writes, build/tests/zoo_table.md) the rows also carry that table's
ops, values, range and execution error, BENCHMARKS.md's zoo table whole (no cells merged by hand).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "zoo"))

import export_zoo  # noqa: E402


def ours_ms(binary, cache, name, info):
    flags = []
    for symbol, size in sorted(info.get("dims", {}).items()):
        flags += ["--dim", f"{symbol}={size}"]
    run = subprocess.run(
        [binary, os.path.join(cache, info["file"]), *flags, "--execute", "host", "--inputs",
         os.path.join(cache, name + ".inputs")], capture_output=True, text=True)
    found = re.search(r"ops in ([0-9.]+) ms", run.stdout)
    if run.returncode != 0 or found is None:
        raise RuntimeError(f"{name}: optimize-net failed: {run.stderr.strip()[:300]}")
    return float(found.group(1))


def zoo_rows(path):
    """model -> (ops, values, range, error) from run_zoo.py's forward table: the file's first
    table (the memory and training tables after it name the same models with other columns)."""
    rows = {}
    with open(path) as f:
        text = f.read()
    lines = []
    for line in text.splitlines():
        if not line.startswith("|"):
            if lines:
                break
            continue
        lines.append(line.strip())
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    wanted = ["ops", "values", "range", "execution (rel. error)"]
    if any(column not in header for column in wanted + ["model"]):
        raise SystemExit(f"{path}: the first table lacks the columns {wanted}")
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        row = dict(zip(header, cells))
        rows[row["model"]] = [row[column] for column in wanted]
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimize-net", required=True)
    parser.add_argument("--cache", required=True, help="the zoo's export folder (manifest.json)")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--zoo-table", help="ctest -R ModelZoo's zoo_table.md: add its columns")
    args = parser.parse_args()
    zoo = zoo_rows(args.zoo_table) if args.zoo_table else None
    torch = export_zoo._torch()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    with open(os.path.join(args.cache, "manifest.json")) as f:
        manifest = json.load(f)["models"]
    if zoo is None:
        print("|model|host kernels (ms)|PyTorch (ms)|host / PyTorch|")
        print("|---|---:|---:|---:|")
    else:
        print("|model|ops|values|range|execution (rel. error)|host kernels (ms)|PyTorch (ms)|"
              "host / PyTorch|")
        print("|---|---:|---:|---|---:|---:|---:|---:|")
    for entry in export_zoo.zoo_entries():
        name, build, make_inputs = entry[0], entry[1], entry[2]
        if args.only and name not in args.only:
            continue
        info = manifest.get(name)
        if info is None or "file" not in info or info.get("error"):
            continue
        torch.manual_seed(0)
        model = build().eval()
        with torch.no_grad():
            for p in model.parameters():
                if p.numel() > 1 and not p.any():
                    p.normal_(0.0, 0.02)
        torch.manual_seed(1)
        inputs = make_inputs()
        with torch.no_grad():
            model(*inputs)
        ours_ms(args.optimize_net, args.cache, name, info)
        best_torch, best_ours = float("inf"), float("inf")
        for _ in range(args.rounds):
            with torch.no_grad():
                start = time.perf_counter()
                model(*inputs)
                best_torch = min(best_torch, (time.perf_counter() - start) * 1000)
            best_ours = min(best_ours, ours_ms(args.optimize_net, args.cache, name, info))
        cells = [name] + (zoo.get(name, ["?"] * 4) if zoo is not None else [])
        cells += [f"{best_ours:.1f}", f"{best_torch:.1f}", f"{best_ours / best_torch:.2f}"]
        print("|" + "|".join(cells) + "|", flush=True)


if __name__ == "__main__":
    main()
