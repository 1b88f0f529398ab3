#!/usr/bin/env bash
# trine without AVX-512 beside llama.cpp's and ik_llama.cpp's AVX2 builds, one line per (round,
# file, runtime) with pp128 and tg32 in t/s (docs/benchmarks.md, "Without AVX-512"). Runs
# alternate per file; start it on an idle machine. trine-native is trine at the best ISA level the
# CPU has (AVX-512 where present).
#
#   bench/avx2_side_by_side.sh THREADS [ROUNDS]
#
# Environment: MODELS (directory of the .gguf files below, default /tmp/trine-models), TRINE
# (default ./build/trine), TRINE_BEFORE (an older trine binary to compare, optional), LLAMA_BENCH
# (llama.cpp AVX2 build's llama-bench, optional), IK_BENCH (ik_llama.cpp AVX2 build's
# llama-bench, optional, run on $MODELS/bitnet-2b-iq2_bn.gguf with -rtr 1).
set -euo pipefail
T=${1:?usage: avx2_side_by_side.sh THREADS [ROUNDS]}
R=${2:-2}
MODELS=${MODELS:-/tmp/trine-models}
TRINE=${TRINE:-./build/trine}

trine_row() { "$@" 2>&1 | grep -E '\| (pp|tg)[0-9]' | awk -F'|' '{gsub(/ /,"",$7); split($8,a," "); printf "%s=%s ", $7, a[1]}'; echo; }
peer_row() { "$@" 2>&1 | grep -E '(pp|tg)[0-9]+ ' | awk -F'|' '{gsub(/ /,"",$(NF-2)); split($(NF-1),a," "); printf "%s=%s ", $(NF-2), a[1]}'; echo; }

for r in $(seq 1 "$R"); do
  for f in bitnet-2b-tq2_0 bitnet-2b-tq1_0 llama-1b-q4_0 llama-1b-q4_k; do
    M=$MODELS/$f.gguf
    [ -f "$M" ] || { echo "skip $f: $M not found" >&2; continue; }
    args=(bench -m "$M" -t "$T" -p 128 -n 32 -r 1)
    if [ -n "${TRINE_BEFORE:-}" ]; then
      echo -n "t$T r$r $f trine-before-avx2: "; TRINE_ISA=avx2 trine_row "$TRINE_BEFORE" "${args[@]}"
    fi
    echo -n "t$T r$r $f trine-avx2: "; TRINE_ISA=avx2 trine_row "$TRINE" "${args[@]}"
    case $f in bitnet*) echo -n "t$T r$r $f trine-avx2-lut: "; TRINE_ISA=avx2 TRINE_TERNARY=lut trine_row "$TRINE" "${args[@]}" ;; esac
    if [ -n "${LLAMA_BENCH:-}" ]; then
      echo -n "t$T r$r $f llama.cpp-avx2: "; peer_row "$LLAMA_BENCH" -m "$M" -t "$T" -p 128 -n 32 -r 1
    fi
    echo -n "t$T r$r $f trine-native: "; trine_row "$TRINE" "${args[@]}"
  done
  if [ -n "${IK_BENCH:-}" ] && [ -f "$MODELS/bitnet-2b-iq2_bn.gguf" ]; then
    echo -n "t$T r$r bitnet-2b-iq2_bn ik_llama-avx2: "
    peer_row "$IK_BENCH" -m "$MODELS/bitnet-2b-iq2_bn.gguf" -t "$T" -p 128 -n 32 -r 1 -rtr 1
  fi
done
