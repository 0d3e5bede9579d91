#!/usr/bin/env bash
# Installs the built tree into a temporary prefix, then configures, builds and runs a small
# project that finds it with find_package(memonger) and links memonger::memonger; where the
# Python package was built, imports it from the prefix and plans the example with it.
set -euo pipefail
binary_dir=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$binary_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/tests/install_consumer" -B "$work/build" \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" -j2 >/dev/null
out=$("$work/build/consumer" "$source_dir/examples/transformer_block_fp16.pbtxt" L=129)
echo "$out"
[[ "$out" == "ops 27" ]]
test -x "$work/prefix/bin/optimize-net"
package="$work/prefix/lib/python3/dist-packages"
if [[ -d "$binary_dir/python/memonger" ]]; then
  (cd "$work" && PYTHONPATH="$package" /usr/bin/python3 -c '
import sys, memonger
plan = memonger.plan(memonger.load(sys.argv[1], dims={"L": 129}))
assert plan.arena_bytes >= plan.lower_bound_bytes > 0, plan
print("python package: OK")' "$source_dir/examples/transformer_block_fp16.pbtxt")
fi
echo "install consumer: OK"
