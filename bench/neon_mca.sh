#!/usr/bin/env bash
# Ranks the NEON kernels by a pipeline MODEL, not a measurement: qemu runs AArch64 code but gives
# no timings, so each kernel's inner loop is timed by llvm-mca (Debian llvm-14) for -mcpu=apple-m1
# and -mcpu=cortex-a76, and printed as cycles per weight byte (and weights per cycle), beside
# llama.cpp's NEON TQ2_0 loop when a llama.cpp checkout is given. kernels/README.md ("NEON
# variants modelled with llvm-mca") holds the table this prints and what the models leave out.
#
#   bench/neon_mca.sh                        # trine's kernels only
#   LLAMA_CPP=/path/to/llama.cpp bench/neon_mca.sh   # and llama.cpp's ggml_vec_dot_tq2_0_q8_K
#
# Needs: aarch64-linux-gnu-g++/-gcc (g++-aarch64-linux-gnu), qemu-aarch64 (qemu-user),
# llvm-mca-14 or llvm-mca (llvm-14), python3; clang++-14 optional (a second compiler's rows).
# Settings (environment): LLAMA_CPP (a llama.cpp checkout; its row is skipped when unset),
# MCA (llvm-mca binary), CPUS ("apple-m1 cortex-a76"), ITERATIONS (100), COMPILERS ("gcc clang"),
# WORK (a folder to keep the harnesses, traces and cut loops in; a temporary one otherwise).
#
# How one figure is made, per kernel and compiler:
#   1. bench/neon_mca/trine_harness.cc (lut_harness.cc for gemm_lut_neon.cc, where it exists) includes kernels/arm/neon/gemm_neon.cc unchanged and calls
#      one kernel once on a row of 8 TQ2_0 blocks (64 Q4_0 blocks), for 1 token (the wrapper is
#      `flatten`, so n_tokens = 1 folds into the loops as in a decode-specialised build) or for 3
#      tokens (the kernel as compiled, with its inner token loop). It is compiled with the flags
#      the NEON object library gets in a Release build (-O3 -DNDEBUG -ffp-contract=off -fPIC
#      -march=armv8.2-a+dotprod) and linked statically. llama.cpp's
#      ggml/src/ggml-cpu/arch/arm/quants.c is compiled with -O3 -DNDEBUG -fPIC
#      -march=armv8.2-a+dotprod (its flags for that CPU level) and called by
#      bench/neon_mca/llama_harness.c.
#   2. qemu-aarch64 -d in_asm,exec,nochain logs every translation block it runs;
#      bench/neon_mca/trace_loop.py rebuilds the executed instruction stream from that log and the
#      objdump listing and cuts out one loop iteration: the instructions executed between two runs
#      of an anchor instruction (the first-executed sdot/sadalp/fcvtl that ran exactly once per
#      iteration: 8 times for 8 blocks, 24 for 8 blocks x 3 tokens, 64 for 64 Q4_0 blocks). The
#      cut is the path actually taken (branches in software fp16 conversions included), loop
#      control included, in execution order.
#   3. llvm-mca -mtriple=aarch64 -mcpu=CPU -iterations=ITERATIONS on that cut: cycles per
#      iteration = Total Cycles / ITERATIONS, divided by the weight bytes one iteration reads (66
#      per TQ2_0 block: 64 code bytes + fp16 scale; 18 per Q4_0 block).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
HERE="$ROOT/bench/neon_mca"
# The trine tree whose kernels are modelled (another checkout or an exported branch; default: this one).
SRC="${TRINE_SRC:-$ROOT}"
CPUS="${CPUS:-apple-m1 cortex-a76}"
ITERATIONS="${ITERATIONS:-100}"
COMPILERS="${COMPILERS:-gcc clang}"
MCA="${MCA:-$(command -v llvm-mca-14 || command -v llvm-mca || true)}"
CXX_GCC="${CXX_GCC:-aarch64-linux-gnu-g++}"
CC_GCC="${CC_GCC:-aarch64-linux-gnu-gcc}"
CLANG="${CLANG:-$(command -v clang++-14 || true)}"
OBJDUMP="${OBJDUMP:-aarch64-linux-gnu-objdump}"
QEMU="${QEMU:-qemu-aarch64}"
# trine's NEON objects in a Release build (CMake's -O3 -DNDEBUG, the project's -ffp-contract=off,
# position-independent) and llama.cpp's ggml-cpu at the same CPU level (a shared library, default
# contraction).
FLAGS=(-O3 -DNDEBUG -fPIC -ffp-contract=off -march=armv8.2-a+dotprod)
LLAMA_FLAGS=(-O3 -DNDEBUG -fPIC -march=armv8.2-a+dotprod)

for tool in "$MCA" "$CXX_GCC" "$OBJDUMP" "$QEMU" python3; do
  if [ -z "$tool" ] || ! command -v "$tool" >/dev/null; then
    echo "neon_mca.sh: missing ${tool:-llvm-mca} (apt-get install llvm-14 g++-aarch64-linux-gnu qemu-user)" >&2
    exit 77
  fi
done
if [ -z "${WORK:-}" ]; then
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"

# Compiler commands for C++ and C, by name.
cxx_of() { if [ "$1" = gcc ]; then echo "$CXX_GCC"; else echo "$CLANG --target=aarch64-linux-gnu"; fi; }
cc_of() { if [ "$1" = gcc ]; then echo "$CC_GCC"; else echo "${CLANG/clang++/clang} --target=aarch64-linux-gnu"; fi; }

# Cases: label | binary (trine/llama) | harness mode | anchor mnemonic | iterations in the run |
# weight bytes per iteration | weights per iteration | what one iteration covers
CASES=(
  "trine int8dot (sdot), decode|trine|tq2_sdot_t1|sdot|8|66|256|1 TQ2_0 block, 1 token"
  "trine int8dot (sdot), per token of a tile|trine|tq2_sdot_tn|sdot|24|66|256|1 token of the inner token loop over 1 block (unpack amortised away)"
  "trine mulfree (and + sadalp), decode|trine|tq2_mulfree_t1|sadalp|8|66|256|1 TQ2_0 block, 1 token"
  "trine mulfree (and + sadalp), per token of a tile|trine|tq2_mulfree_tn|sadalp|24|66|256|1 token of the inner token loop over 1 block"
  "trine Q4_0 x Q8_0 (sdot), decode|trine|q4_0_t1|sdot|64|18|32|1 Q4_0 block (16 nibble bytes + fp16 scale), 1 token"
  "llama.cpp ggml_vec_dot_tq2_0_q8_K (sdot), decode|llama|llama|sdot|8|66|256|1 TQ2_0 block, 1 token"
)
# The lookup-table kernel, where the tree has it: one iteration is one block of a 16-row group in
# the lookup-table layout (16 x 64 code bytes + 16 fp16 scales); its tables are built once per
# token and block and shared by every row group (a row of their own, bytes "-").
if [ -f "$SRC/kernels/arm/neon/gemm_lut_neon.cc" ]; then
  CASES+=(
    "trine lut (tbl), decode|lut|lut_t1|fcvtl|8|1056|4096|1 block of a 16-row group, 1 token"
    "trine lut (tbl), per token of a tile|lut|lut_tn|fcvtl|24|1056|4096|1 token x 1 block of a 16-row group"
    "trine lut: table build|lut|lut_t1|uzp1|8x|0|0|tables of 1 token x 1 block (shared by all row groups)"
  )
fi
if [ -n "${EXTRA_CASES:-}" ]; then
  while IFS= read -r c; do [ -n "$c" ] && CASES+=("$c"); done <<<"$EXTRA_CASES"
fi

build() {  # build COMPILER: the harness binaries for one compiler
  local comp="$1" cxx cc extra=()
  # gemm_neon.cc's table names every NEON kernel, so the other NEON files are linked in too.
  [ -f "$SRC/kernels/arm/neon/gemm_lut_neon.cc" ] && extra=("$SRC/kernels/arm/neon/gemm_lut_neon.cc")
  cxx="$(cxx_of "$comp")"
  cc="$(cc_of "$comp")"
  $cxx -std=c++17 "${FLAGS[@]}" -I"$SRC/src" -I"$SRC/kernels" -static \
    "$HERE/trine_harness.cc" "$SRC/kernels/arm/neon/quantize_act_neon.cc" "${extra[@]}" -o "$WORK/trine.$comp"
  "$OBJDUMP" -d --no-show-raw-insn "$WORK/trine.$comp" >"$WORK/trine.$comp.dump"
  if [ -f "$SRC/kernels/arm/neon/gemm_lut_neon.cc" ]; then
    $cxx -std=c++17 "${FLAGS[@]}" -I"$SRC/src" -I"$SRC/kernels" -static "$HERE/lut_harness.cc" \
      "$SRC/kernels/arm/neon/gemm_neon.cc" "$SRC/kernels/arm/neon/quantize_act_neon.cc" -o "$WORK/lut.$comp"
    "$OBJDUMP" -d --no-show-raw-insn "$WORK/lut.$comp" >"$WORK/lut.$comp.dump"
  fi
  if [ -n "${LLAMA_CPP:-}" ]; then
    local L="$LLAMA_CPP"
    $cc -std=gnu11 "${LLAMA_FLAGS[@]}" -I"$L/ggml/include" -I"$L/ggml/src" -I"$L/ggml/src/ggml-cpu" \
      -ffunction-sections -fdata-sections -c "$L/ggml/src/ggml-cpu/arch/arm/quants.c" -o "$WORK/llama_quants.$comp.o"
    $cc "${LLAMA_FLAGS[@]}" -static "$HERE/llama_harness.c" "$WORK/llama_quants.$comp.o" -Wl,--gc-sections \
      -Wl,--unresolved-symbols=ignore-all -o "$WORK/llama.$comp"
    "$OBJDUMP" -d --no-show-raw-insn "$WORK/llama.$comp" >"$WORK/llama.$comp.dump"
  fi
}

comps=()
for comp in $COMPILERS; do
  if [ "$comp" = clang ] && [ -z "$CLANG" ]; then
    echo "neon_mca.sh: no clang++-14, clang rows skipped" >&2
    continue
  fi
  build "$comp"
  comps+=("$comp")
done

header="| kernel loop | compiler | one iteration | weight bytes / iter"
sep="|---|---|---|---:"
for cpu in $CPUS; do
  header+=" | $cpu cycles / iter | $cpu cycles / weight byte | $cpu weights / cycle"
  sep+="|---:|---:|---:"
done
echo "$header |"
echo "$sep|"
for c in "${CASES[@]}"; do
  IFS='|' read -r label bin mode anchor count bytes weights what <<<"$c"
  if [ "$bin" = llama ] && [ -z "${LLAMA_CPP:-}" ]; then
    echo "neon_mca.sh: LLAMA_CPP unset, '$label' skipped" >&2
    continue
  fi
  for comp in "${comps[@]}"; do
    tag="$mode.$anchor.$bin.$comp"
    args=()
    [ "$bin" != llama ] && args=("$mode")
    "$QEMU" -d in_asm,exec,nochain -D "$WORK/$tag.log" "$WORK/$bin.$comp" "${args[@]}" >/dev/null
    python3 "$HERE/trace_loop.py" "$WORK/$tag.log" "$WORK/$bin.$comp.dump" "$anchor" "$count" >"$WORK/$tag.s" \
      2>"$WORK/$tag.cut"
    rm -f "$WORK/$tag.log"
    row="| $label | $comp | $what | ${bytes/#0/-}"
    for cpu in $CPUS; do
      "$MCA" -mtriple=aarch64 -mcpu="$cpu" -iterations="$ITERATIONS" "$WORK/$tag.s" >"$WORK/$tag.$cpu.mca" 2>&1
      total=$(awk '/^Total Cycles:/ {print $3}' "$WORK/$tag.$cpu.mca")
      row+=$(awk -v t="$total" -v n="$ITERATIONS" -v b="$bytes" -v w="$weights" \
        'BEGIN { c = t / n; if (b > 0) printf " | %.2f | %.3f | %.2f", c, c / b, w / c; else printf " | %.2f | - | -", c }')
    done
    echo "$row |"
  done
done
echo
echo "llvm-mca $("$MCA" --version | awk '/LLVM version/ {print $NF}'), -iterations=$ITERATIONS; trine ${FLAGS[*]}${LLAMA_CPP:+; llama.cpp ${LLAMA_FLAGS[*]}}; compilers:" \
  "$(for comp in "${comps[@]}"; do if [ "$comp" = gcc ]; then "$CXX_GCC" --version | head -1; else "$CLANG" --version | head -1; fi; done | paste -sd";")" \
  "${LLAMA_CPP:+; llama.cpp $(git -C "$LLAMA_CPP" rev-parse --short HEAD 2>/dev/null || echo '(not a git checkout)')}"
