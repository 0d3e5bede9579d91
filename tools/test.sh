#!/usr/bin/env bash
# Quick start, part 2: installs what is missing, builds everything (library, tool, tests,
# benchmarks) and runs the whole test suite; then the sanitizer job (tools/sanitize.sh: the
# tests again under ASan + UBSan in build-asan/, and each fuzzer briefly; docs/fuzzing.md).
# Arguments go to the main ctest (tools/test.sh -R Planner) and skip the sanitizer job.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --browser
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
if [[ $# -eq 0 ]]; then
  tools/sanitize.sh
fi
