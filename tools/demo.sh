#!/usr/bin/env bash
# Quick start, part 1: installs what is missing, builds, and runs optimize-net on the bundled
# fp16 transformer block at 18,000 tokens (+1 class token).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target optimize-net
build/tools/optimize-net examples/transformer_block_fp16.pbtxt --dim L=18001 "$@"
