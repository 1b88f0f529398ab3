#!/usr/bin/env bash
# The README's plan-vs-uniform table: the profiler's plan under a memory budget beside uniform
# plans (every matrix with int8 "a8" or fp32 "a16" activations, the head in f16/q8_0/q4_0, the KV
# cache in f16/q8_0/q4_0), each measured with `trine profile --report`: perplexity over the whole
# held-out text in windows of 256 (llama.cpp's protocol, as `trine perplexity -c 256 -b 256`), KL
# against the all-fp32 baseline, decode speed (best of 3 x 64 single-token decodes, per second of
# process CPU time, which other processes on the machine disturb far less than wall time, and per
# wall-clock second), and the plan's memory estimate (weights + KV + activation buffers + logits).
#
# usage: scripts/plan-vs-uniform.sh [BUILD_DIR=build] [BUDGET=7M] [THREADS=1]
# Needs python3 (reads the report.json files). Prints a Markdown table on stdout.
set -euo pipefail

BUILD=${1:-build}
BUDGET=${2:-7M}
THREADS=${3:-1}
TRINE=$BUILD/trine
MODEL=models/bitnet-tiny-stories-TQ2_0-f16emb.gguf
TEXT=models/text/tinystories-heldout.txt
OUT=$(mktemp -d /tmp/trine-plan-table.XXXXXX)
export XDG_CACHE_HOME=$OUT/cache  # a fresh plan cache: the plan row is profiled here

common=(-m "$MODEL" -c 256 -t "$THREADS" -q --ppl-text "$TEXT" --ppl-ctx 256 --ppl-windows 0 --no-baseline)
run() {  # name, then trine profile arguments
  local name=$1
  shift
  echo "running: $TRINE profile ${common[*]} $* --report $OUT/$name" >&2
  "$TRINE" profile "${common[@]}" "$@" --report "$OUT/$name" > /dev/null
}

run plan --mem-budget "$BUDGET"
run a16-f16-f16 --uniform a16 --head-type file --kv-type f16
run a8-f16-f16 --uniform a8 --head-type file --kv-type f16
run a8-f16-q8_0 --uniform a8 --head-type file --kv-type q8_0
run a8-q8_0-q8_0 --uniform a8 --head-type q8_0 --kv-type q8_0
run a8-q8_0-q4_0 --uniform a8 --head-type q8_0 --kv-type q4_0
run a8-q4_0-q8_0 --uniform a8 --head-type q4_0 --kv-type q8_0
run a8-q4_0-q4_0 --uniform a8 --head-type q4_0 --kv-type q4_0
run a16-q4_0-q4_0 --uniform a16 --head-type q4_0 --kv-type q4_0

python3 - "$OUT" "$BUDGET" <<'EOF'
import json, sys
out, budget = sys.argv[1], sys.argv[2]
rows = ["plan", "a16-f16-f16", "a8-f16-f16", "a8-f16-q8_0", "a8-q8_0-q8_0", "a8-q8_0-q4_0", "a8-q4_0-q8_0",
        "a8-q4_0-q4_0", "a16-q4_0-q4_0"]
print("| plan | activations (blk.0-3, head) | head | KV cache | memory MiB (weights + KV) | KL measured "
      "| perplexity | decode tok/s (CPU time / wall) |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    j = json.load(open(f"{out}/{r}/report.json"))
    acts = " ".join("a8" if l["precision"] == "int8" else "a16" for l in j["layers"])
    m = j["memory"]
    total = (m["weights"] + m["kv"] + m["activations"] + m["buffers"]) / 2**20
    wkv = (m["weights"] + m["kv"]) / 2**20
    name = f"profiler, --mem-budget {budget}" if r == "plan" else "uniform " + r.split("-")[0]
    head = j["output"]["type"] or j["output"]["file_type"]
    print(f"| {name} | {acts} | {head} | {j['kv']['type']} | {total:.2f} ({wkv:.2f}) | "
          f"{j['profile']['kl_plan']:.6f} | {j['measured']['ppl_plan']:.4f} | "
          f"{j['measured']['tok_s_cpu']:.0f} / {j['measured']['tok_s']:.0f} |")
EOF
