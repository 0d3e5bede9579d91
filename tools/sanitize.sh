#!/usr/bin/env bash
# The sanitizer job (docs/fuzzing.md): builds build-asan/ with clang, ASan + UBSan on everything
# we compile and the libFuzzer harnesses of fuzz/, runs the test suite there, then each fuzzer
# for a short time (tools/fuzz.sh). tools/test.sh runs it after the main tests.
#
#   tools/sanitize.sh                 configure, build, ctest, fuzz each harness briefly
#   tools/sanitize.sh --configure     configure build-asan/ only (tools/fuzz.sh uses this)
#   MEMONGER_FUZZ_SECONDS=N tools/sanitize.sh    N seconds per harness (default 15)
#
# Host only (no CUDA: the sanitizers here are host ones), no benchmarks, -O1 with line tables
# (the sanitizers' stacks name file:line; full -g only makes the objects bigger and the links
# slower).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-asan

tools/setup.sh
if [[ ! -f $build/CMakeCache.txt ]] || ! grep -q '^MEMONGER_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  CC=clang CXX=clang++ cmake -S . -B "$build" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DMEMONGER_SANITIZE=address,undefined -DMEMONGER_FUZZ=ON \
    -DMEMONGER_ENABLE_CUDA=OFF -DMEMONGER_BUILD_BENCHMARKS=OFF -DMEMONGER_PARITY_NETS=100 >/dev/null
fi
if [[ "${1:-}" == "--configure" ]]; then
  exit 0
fi
cmake --build "$build" -j"$(nproc)"

# Every sanitizer report fails its test: ASan aborts on the first error (as does UBSan, built
# with -fno-sanitize-recover=all); stacks are symbolized with llvm-symbolizer. abort_on_error=1
# makes that a SIGABRT rather than exit(1), which matters in one place: libonnx's shape
# inference runs in a forked child whose death by a signal the ONNX importer reports as
# InvalidArgument (graph/onnx/onnx_shape_inference.cc). Under ASan a libonnx crash there is
# first an ASan report; with abort_on_error it still ends as a signal, as without ASan.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-abort_on_error=1:print_stacktrace=1}
# Left out under the sanitizers, each for a reason of its own (the main build runs them all):
# - InstallConsumer installs this tree and builds a consumer against it with the default
#   compiler and flags: the sanitized libraries need clang's sanitizer runtimes at link time,
#   which a consumer does not ask for.
# - RecomputeTest.ChainAndResidualNetsFitOrSayTheBudgetIsInfeasible and
#   RecomputeTest.ExactNeverCostsMoreThanSqrtAtItsLowerBound expect a search under a wall-clock
#   limit (0.5 s, 10 s) to reach a budget or prove optimality, sized for an optimised build:
#   several times slower here, the search runs out of time and the expectation fails without a
#   bug.
# - OffsetPlannersTest.RandomProblemsVerify<Exact>: 400 branch-and-bound searches run to the
#   proof, 8 s optimised but over 2 minutes under ASan and the fuzzer's coverage counters, the
#   longest test by far (ExactOffsetsTest and the planners fuzzer run the same code here).
# - HostileInputTest's onnx_conv_stride_zero: libonnx divides by the zero stride in the child
#   process that runs its shape inference, which is the case the child is there for; ASan in
#   the child reports the SIGFPE on stderr before it dies, and the test counts stderr's lines
#   (one, the importer's error, without ASan).
# - ModelZoo exports real models with PyTorch and runs the tool on each (minutes optimised);
#   its planning and execution code is the same the sanitized unit tests and fuzzers cover.
excluded='^(InstallConsumer$'
excluded+='|ModelZoo$'
excluded+='|RecomputeTest\.ChainAndResidualNetsFitOrSayTheBudgetIsInfeasible$'
excluded+='|RecomputeTest\.ExactNeverCostsMoreThanSqrtAtItsLowerBound$'
excluded+='|OffsetPlannersTest\.RandomProblemsVerify<OffsetPlannersTest/Exact\.'
excluded+='|Table/HostileInputTest\.ClearErrorNoSignalNothingLeftBehind/onnx_conv_stride_zero( |$))'
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -E "$excluded"

tools/fuzz.sh "${MEMONGER_FUZZ_SECONDS:-15}"
