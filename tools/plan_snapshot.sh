#!/usr/bin/env bash
# Writes the --plan-json of a fixed set of planning problems into DIR, one file per problem,
# with the fields that depend on the clock removed, so that two trees can be compared after a
# change that must not change plans (a refactoring):
#
#   tools/plan_snapshot.sh build/tools/optimize-net /tmp/before
#   ... change, rebuild ...
#   tools/plan_snapshot.sh build/tools/optimize-net /tmp/after && diff -r /tmp/before /tmp/after
#
# The set: every trace of the planning corpus with each offset planner; the workloads with the
# memonger baselines, training, views, recycled inputs, the topological and longest-path
# orders, recomputation and a parallel executor;
# exact sharing and the memory-aware order on small nets; every ONNX file of the model zoo's
# export cache (tests/zoo/run_zoo.py fills it) with best-fit, views and memonger-dag. Time-limited searches get limits
# far above what these problems need, so that the clock cannot cut them.
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: tools/plan_snapshot.sh OPTIMIZE_NET OUT_DIR" >&2
  exit 2
fi
cli=$1
out=$2
parts="${MEMONGER_SNAPSHOT_PARTS:-traces workloads zoo}"  # which of the three sets to plan
root="$(cd "$(dirname "$0")/.." && pwd)"
traces="${MEMONGER_TRACES:-$root/../shared/corpus/traces}"
zoo="${MEMONGER_ZOO_CACHE:-$HOME/.cache/memonger/zoo}"
mkdir -p "$out"

# plan NAME ARGS...: one plan, its timings stripped.
plan() {
  local name=$1
  shift
  local file="$out/$name.json"
  local rc=0
  "$cli" "$@" --plan-json "$file.raw" >"$out/$name.stdout" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "exit $rc" >>"$out/$name.stdout"
    rm -f "$file.raw"
    return 0
  fi
  /usr/bin/python3 - "$file.raw" "$file" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
def strip(node):
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if 'seconds' not in k and k != 'timings'}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node
json.dump(strip(doc), open(sys.argv[2], 'w'), indent=1, sort_keys=True)
EOF
  rm -f "$file.raw"
  rm -f "$out/$name.stdout"
}

has_part() { [[ " $parts " == *" $1 "* ]]; }

has_part traces && for trace in "$traces"/*.csv; do
  t=$(basename "$trace" .csv)
  for p in greedy-by-size best-fit; do plan "trace-$t-$p" "$trace" --planner "$p" --threads 1; done
  case "$t" in
    mm_*|S_1|Y_1) ;;  # their exact searches are cut by any limit that keeps this script short
    *) plan "trace-$t-exact" "$trace" --planner exact --time-limit 60 --threads 1 ;;
  esac
done

workloads=(
  "mlp:layers=3" "mlp:layers=3,mode=training" "resnet50:batch=32" "resnet50:batch=8,mode=training"
  "attention:n=2048" "random:ops=2000,seed=1" "random:ops=2000,seed=2,mode=training"
  "random:ops=2000,seed=3,dtype=fp16" "randwire:nodes=32,k=4,p=75,stages=3"
  "guillotine:records=60,seed=1"
)
has_part workloads && for w in "${workloads[@]}"; do
  n=${w//[:=,]/_}
  for p in none best-fit memonger-dag memonger-greedy memonger-fast; do
    plan "wl-$n-$p" --workload "$w" --planner "$p" --threads 1 --time-limit 60
  done
  plan "wl-$n-views" --workload "$w" --planner best-fit --views --threads 1
  plan "wl-$n-recycle" --workload "$w" --planner best-fit --recycle-inputs --plan-static \
    --threads 1
  plan "wl-$n-parallel" --workload "$w" --planner memonger-dag --execution parallel
  for order in topological longest-path; do
    plan "wl-$n-$order" --workload "$w" --planner best-fit --order "$order" --threads 1
  done
done
# Searches that end where they prove their answer: small nets only, so that no limit cuts them.
has_part workloads && for w in "mlp:layers=3" "mlp:layers=3,mode=training" \
    "randwire:nodes=16,k=4,p=75,stages=2"; do
  n=${w//[:=,]/_}
  plan "wl-$n-exact-sharing" --workload "$w" --planner exact-sharing --time-limit 60
  if [[ $w == mlp* ]]; then
    plan "wl-$n-memonger-dp" --workload "$w" --planner memonger-dp --time-limit 60
  fi
  plan "wl-$n-memorder" --workload "$w" --planner best-fit --order memory-aware \
    --time-limit 120 --threads 1
done
has_part workloads && for w in "mlp:layers=3,mode=training" "resnet50:batch=8,mode=training" \
    "random:ops=2000,seed=2,mode=training"; do
  n=${w//[:=,]/_}
  plan "wl-$n-recompute" --workload "$w" --planner best-fit --recompute sqrt --threads 1
done

# The zoo: each exported model with its named dims at their exported sizes, as run_zoo.py
# plans it first.
zoo_models='
import json, os, sys
folder = os.path.dirname(sys.argv[1])
for name, info in sorted(json.load(open(sys.argv[1]))["models"].items()):
    if "file" in info:
        dims = " ".join(f"--dim {k}={v}" for k, v in sorted(info.get("dims", {}).items()))
        print(name, os.path.join(folder, info["file"]), dims, sep="\t")
'
has_part zoo && for manifest in "$zoo"/*/manifest.json; do
  [[ -f "$manifest" ]] || continue
  while IFS=$'\t' read -r name model dims; do
    read -r -a dim_flags <<<"$dims"
    plan "zoo-$name-bestfit" "$model" "${dim_flags[@]}" --planner best-fit --threads 1
    plan "zoo-$name-views" "$model" "${dim_flags[@]}" --planner best-fit --views --threads 1
    plan "zoo-$name-dag" "$model" "${dim_flags[@]}" --planner memonger-dag
  done < <(/usr/bin/python3 -c "$zoo_models" "$manifest")
done
echo "plan_snapshot: $(find "$out" -name '*.json' | wc -l) plans, $(find "$out" -name '*.stdout' | wc -l) refusals in $out"
