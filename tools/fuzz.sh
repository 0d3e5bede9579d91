#!/usr/bin/env bash
# Runs the libFuzzer harnesses of fuzz/ (docs/fuzzing.md), built with ASan + UBSan in
# build-asan/ (configured by tools/sanitize.sh when needed; only the harnesses are built here).
#
#   tools/fuzz.sh [SECONDS] [HARNESS...]    each harness for SECONDS (default 20), as many at
#                                           a time as there are cores (MEMONGER_FUZZ_JOBS);
#                                           all of them when none is named
#   tools/fuzz.sh 3600                      the longer local run: an hour each
#
# Each harness fuzzes a working copy of its seed corpus (fuzz/corpus/NAME/) and of its
# regression reproducers (tests/fuzz_regressions/NAME/) in build-asan/fuzz-corpus/NAME/: what it
# finds new stays there for the next local run, the repository's corpus never grows. A crash,
# sanitizer report, timeout (an input running over 20 s) or out-of-memory (over 2 GiB) leaves
# its input in build-asan/fuzz-artifacts/NAME/ and makes the exit status 1; the log of each run
# is build-asan/fuzz-logs/NAME.log.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-asan

seconds=${1:-20}
if [[ $# -gt 0 ]]; then shift; fi
if ! [[ $seconds =~ ^[0-9]+$ ]] || [[ $seconds -eq 0 ]]; then
  echo "usage: tools/fuzz.sh [SECONDS] [HARNESS...]" >&2
  exit 2
fi
harnesses=("$@")
if [[ ${#harnesses[@]} -eq 0 ]]; then
  for src in fuzz/*_fuzzer.cc; do
    name=$(basename "$src" _fuzzer.cc)
    harnesses+=("$name")
  done
fi
for name in "${harnesses[@]}"; do
  if [[ ! -f fuzz/${name}_fuzzer.cc ]]; then
    echo "fuzz: no harness '$name' (fuzz/${name}_fuzzer.cc)" >&2
    exit 2
  fi
done

tools/sanitize.sh --configure
targets=()
for name in "${harnesses[@]}"; do targets+=("${name}_fuzzer"); done
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
mkdir -p "$build/fuzz-logs"
rm -f "$build"/fuzz-logs/*.failed

# One harness: fuzz, then one line of summary (or the finding's report). fuzz-logs/NAME.failed
# stays behind unless the run ends without a finding (so a run that dies early also counts).
fuzz_one() {
  local name=$1
  touch "$build/fuzz-logs/$name.failed"
  local corpus=$build/fuzz-corpus/$name
  local artifacts=$build/fuzz-artifacts/$name
  local log=$build/fuzz-logs/$name.log
  mkdir -p "$corpus" "$artifacts"
  # Fixed findings only: tests/fuzz_regressions/NAME/open/ holds the ones still failing.
  local dir
  for dir in fuzz/corpus/"$name" tests/fuzz_regressions/"$name"; do
    if [[ -d $dir ]]; then find "$dir" -maxdepth 1 -type f -exec cp -f -t "$corpus" {} +; fi
  done
  local dict=()
  if [[ -f fuzz/dict/$name.dict ]]; then dict=(-dict="fuzz/dict/$name.dict"); fi
  local before after status=0 runs
  before=$(ls "$artifacts" | wc -l)
  "$build/fuzz/${name}_fuzzer" "$corpus" "${dict[@]}" -max_total_time="$seconds" \
    -timeout=20 -rss_limit_mb=2048 -artifact_prefix="$artifacts/" -print_final_stats=1 \
    >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  after=$(ls "$artifacts" | wc -l)
  if [[ $status -ne 0 ]]; then
    {
      echo "fuzz: $name: FAILED (exit $status) after ${runs:-?} runs; new artifacts in $artifacts:"
      ls -t "$artifacts" | head -n $((after - before)) | sed 's/^/  /'
      grep -m1 -A40 -E '^==[0-9]+==ERROR|^SUMMARY|fuzz finding|runtime error|internal invariant' \
        "$log" || tail -n 40 "$log"
    } >&2
  else
    echo "fuzz: $name: ${runs:-?} runs in ${seconds} s, no crash"
    rm "$build/fuzz-logs/$name.failed"
  fi
}

# libFuzzer runs on one core: as many harnesses at a time as there are cores
# (MEMONGER_FUZZ_JOBS to choose).
jobs=${MEMONGER_FUZZ_JOBS:-$(nproc)}
running=0
for name in "${harnesses[@]}"; do
  if [[ $running -ge $jobs ]]; then
    wait -n || true  # the NAME.failed markers tell
    running=$((running - 1))
  fi
  fuzz_one "$name" &
  running=$((running + 1))
done
wait

failed=()
for name in "${harnesses[@]}"; do
  if [[ -f $build/fuzz-logs/$name.failed ]]; then failed+=("$name"); fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: findings in ${failed[*]} (logs: $build/fuzz-logs/; docs/fuzzing.md says how a" \
    "finding becomes a regression test)" >&2
  exit 1
fi
