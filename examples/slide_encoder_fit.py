#!/usr/bin/env python3
"""How long a slide can an fp16 slide encoder take on one 80 GB GPU, and what would eager
PyTorch use there?

A whole-slide image is tens of thousands of tiles; a slide encoder (TITAN-like: a ViT over the
tiles' embeddings, dim 768, 6 blocks, 12 heads, an ALiBi bias from the tiles' 2-D positions)
attends over all of them, and its N x N scores decide whether a slide fits. This script builds
the encoder in PyTorch, plans its fp16 forward pass with memonger for any number of tiles (one
export with a dynamic axis), finds the largest number that fits the budget, and counts what
eager PyTorch allocates at that length.

    PYTHONPATH=build/python /usr/bin/python3 examples/slide_encoder_fit.py [--budget 80GB]

Eager PyTorch's bytes come from memonger.torch.eager_memory: run for real where the length is
small enough to run here (the profiler's allocation events), and counted on PyTorch's meta
device at the fitted length (every op runs without data; its outputs' storages are counted
from allocation to their last reference). The script checks that the two agree at a length it
can run before it trusts the count.
"""
import argparse
import math
import sys

import torch

import memonger
import memonger.torch as mt


class Block(torch.nn.Module):
    """A pre-norm transformer block whose attention adds the ALiBi bias to its scores."""

    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, mlp)
        self.fc2 = torch.nn.Linear(mlp, dim)

    def forward(self, x, bias):
        b, n, d = x.shape
        h = self.heads
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = (q @ k.transpose(-2, -1)) * (d // h) ** -0.5 + bias
        attn = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, d)
        x = x + self.proj(attn)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm2(x))))


class SlideEncoder(torch.nn.Module):
    """Tiles' embeddings [1, N, dim] and their grid positions [N, 2] -> slide tokens."""

    def __init__(self, dim=768, depth=6, heads=12, mlp=3072):
        super().__init__()
        # ALiBi's slopes, one per head: 2^(-8 h / H).
        self.register_buffer("slopes", torch.tensor(
            [2.0 ** (-8.0 * (i + 1) / heads) for i in range(heads)]).reshape(1, heads, 1, 1))
        self.blocks = torch.nn.ModuleList(Block(dim, heads, mlp) for _ in range(depth))
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, tiles, coords):
        diff = coords.unsqueeze(1) - coords.unsqueeze(0)              # [N, N, 2]
        distance = torch.sqrt((diff * diff).sum(-1))                  # [N, N]
        bias = -self.slopes * distance                                # [1, H, N, N], to the end
        x = tiles
        for block in self.blocks:
            x = block(x, bias)
        return self.norm(x)


def example(n, dtype=torch.float32, device="cpu"):
    side = math.ceil(math.sqrt(n))
    grid = torch.stack(torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij"), -1)
    coords = grid.reshape(-1, 2)[:n].to(dtype=dtype, device=device)
    return (torch.randn(1, n, 768, dtype=dtype, device=device), coords)


def gb(b):
    return f"{b / 1e9:.2f} GB"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", default="80GB", help="device memory (80GB, 24GiB, ...)")
    parser.add_argument("--max-tiles", type=int, default=200000)
    parser.add_argument("--check-tiles", type=int, default=512,
                        help="a length run for real to check the meta-device count")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    encoder = SlideEncoder().eval()

    # One export, every length: the number of tiles is the dynamic axis "tiles"; fp16 as the
    # GPU runs it (exported in fp32, every float tensor converted: CPU PyTorch 1.13 cannot trace
    # fp16 matmuls).
    axes = {"tiles": {1: "n"}, "coords": {0: "n"}}
    data, _ = mt.export_onnx(encoder, example(64), dynamic_axes=axes, dtype=torch.float16)
    model = memonger.load(data, name="slide_encoder_fp16.onnx")
    fit = memonger.fit(model, symbol="n", budget=args.budget, time_limit=1.0)
    largest = fit["largest"]
    print(f"budget {args.budget}: the largest slide that fits, in tiles")
    for cure, n in largest.items():
        print(f"  {cure:<14} {n if n is not None else 'none fits'}")
    order = max(("given", "memory-aware"), key=lambda cure: largest.get(cure) or 0)
    n = largest.get(order)
    if n is None:
        return 1
    plan = memonger.plan(memonger.load(data, dims={"n": n}), time_limit=1.0, budget=args.budget,
                         order=order)

    # Eager PyTorch: measured where it runs here, counted on the meta device at n.
    check = mt.eager_memory(encoder, example(args.check_tiles))
    counted = mt.eager_memory(encoder, example(args.check_tiles), device="meta")
    agree = abs(check["peak_bytes"] - counted["peak_bytes"]) <= 0.01 * check["peak_bytes"]
    print(f"eager check at {args.check_tiles} tiles (fp32, CPU): measured "
          f"{check['peak_bytes']:,} B, meta-device count {counted['peak_bytes']:,} B"
          f" ({'agree' if agree else 'DIFFER'})")
    if not agree:
        return 1
    eager = mt.eager_memory(encoder.half(), example(n, torch.float16), device="meta")
    weights = plan.static_bytes
    inputs = sum(v["size"] for v in plan.values if v["role"] == "input")
    ours = plan.arena_bytes + weights
    theirs = eager["peak_bytes"] + inputs + weights
    print(f"at {n} tiles, fp16:")
    print(f"  memonger      arena {gb(plan.arena_bytes)} (lower bound "
          f"{gb(plan.lower_bound_bytes)}) + weights {gb(weights)} = {gb(ours)}")
    print(f"  eager PyTorch {gb(eager['peak_bytes'])} during the pass + inputs {gb(inputs)} + "
          f"weights {gb(weights)} = {gb(theirs)} ({theirs / ours:.2f}x; "
          f"{'fits' if theirs <= plan.budget_bytes else 'does not fit'} {args.budget})")
    # The most tiles eager PyTorch fits in the same budget: a bisection on the meta count.
    budget = plan.budget_bytes
    half = encoder.half()

    def eager_total(tiles):
        counted = mt.eager_memory(half, example(tiles, torch.float16), device="meta")
        return counted["peak_bytes"] + weights + tiles * (768 + 2) * 2

    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if eager_total(mid) <= budget else (lo, mid - 1)
    print(f"  eager PyTorch fits at most {lo} tiles in {args.budget} "
          f"(memonger: {n}, {n / lo:.2f}x as many)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
