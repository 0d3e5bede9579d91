#!/usr/bin/env python3
"""Writes the 10^6-record random trace of bench/offset_scale_bench.cc (`trace`) as a MiniMalloc
CSV, for timing whole `optimize-net` runs on it (BENCHMARKS.md, "Scale"):

  bench/random_trace.py [--records N] [--seed S] > trace.csv
  optimize-net trace.csv

Record i: first step uniform in [0, 2^20), 1 to 128 steps, 256 B x 2^k for k in [0, 9), drawn in
that order from SplitMix64 (util/splitmix64.h) seeded with S: the same records as the bench's.
"""
import argparse
import sys

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--records', type=int, default=1000000)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args()
    rng = SplitMix64(args.seed)
    out = sys.stdout
    out.write('id,lower,upper,size\n')
    for i in range(args.records):
        first = rng.below(1 << 20)
        last = first + rng.below(128)
        size = 256 << rng.below(9)
        out.write(f'{i},{first},{last + 1},{size}\n')  # upper is exclusive


if __name__ == '__main__':
    main()
