#!/usr/bin/env bash
# Cross-builds the AArch64 NEON kernels (kernels/arm/neon) with Debian's g++-aarch64-linux-gnu and
# checks them under qemu-aarch64 (Debian qemu-user) against the scalar reference. Installs nothing:
# scripts/install-deps.sh provides both tools. Registered as the ctest test `neon_kernels_qemu`.
#
#   scripts/test-neon.sh [BUILD_DIR] [--werror] [--full]      (BUILD_DIR defaults to build-neon/)
#
# The build is the standalone project in tests/neon (kernels/, the tensor formats and a check
# program; no third-party libraries, which Debian ships for arm64 only through multiarch), built
# with cmake/toolchain-aarch64.cmake. Runs:
#   1. TRINE_ISA=neon on qemu's default CPU (`max`, which has the dot product): every NEON kernel
#      against GemmRef on ragged shapes, NaN-poisoned outputs, bit-exact on integer paths;
#   2. TRINE_ISA unset: dispatch picks neon by itself (getauxval HWCAP_ASIMDDP);
#   3. TRINE_ISA=neon on a Cortex-A72 (ARMv8.0, no dot product): neon is reported unsupported
#      and the reference is used;
#   4. TRINE_ISA=ref: forcing the reference works.
# Exit status: 0 all passed, 1 a failure, 77 the cross compiler or qemu is missing (ctest: skip).
#
# --full (manual, not in CI: ~8 min on 2 cores) then cross-builds the whole project into
# BUILD_DIR-full and runs kernels_test (the GoogleTest conformance suite) and model_test (parity
# with llama.cpp on every shipped model) under qemu with TRINE_ISA=neon. It needs arm64 builds of
# PCRE2, GoogleTest and zlib (the tests' CMakeLists asks for it): multiarch (dpkg
# --add-architecture arm64; apt-get install libpcre2-dev:arm64 libgtest-dev:arm64
# libgmock-dev:arm64 zlib1g-dev:arm64), or, leaving the host's dpkg alone:
#   d=/tmp/apt-arm64; mkdir -p $d/lists/partial $d/cache/archives/partial; touch $d/status
#   A="-o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Dir::State::Lists=$d/lists
#      -o Dir::Cache=$d/cache -o Dir::State::status=$d/status"
#   apt-get $A update && (cd $d && apt-get $A download libpcre2-dev libpcre2-8-0 libgtest-dev libgmock-dev \
#     zlib1g-dev zlib1g)
#   for f in $d/*.deb; do dpkg -x "$f" /tmp/arm64-root; done
#   TRINE_AARCH64_EXTRA_ROOT=/tmp/arm64-root scripts/test-neon.sh --full
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$ROOT/build-neon"
WERROR=OFF
FULL=0
for arg in "$@"; do
  case "$arg" in
    --werror) WERROR=ON ;;
    --full) FULL=1 ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    -*) echo "test-neon.sh: unknown option $arg" >&2; exit 2 ;;
    *) BUILD="$arg" ;;
  esac
done

CXX_CROSS=aarch64-linux-gnu-g++
SYSROOT=/usr/aarch64-linux-gnu
for tool in "$CXX_CROSS" qemu-aarch64 cmake; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "test-neon.sh: $tool not found (apt-get install g++-aarch64-linux-gnu qemu-user); skipping" >&2
    exit 77
  fi
done

start=$(date +%s.%N)
if [ ! -f "$BUILD/CMakeCache.txt" ] || ! grep -q "^TRINE_WERROR:BOOL=$WERROR\$" "$BUILD/CMakeCache.txt"; then
  mkdir -p "$BUILD"
  cmake -S "$ROOT/tests/neon" -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchain-aarch64.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DTRINE_WERROR="$WERROR" >"$BUILD/configure.log" 2>&1 ||
    { cat "$BUILD/configure.log" >&2; exit 1; }
fi
cmake --build "$BUILD" -j"${TRINE_NEON_JOBS:-1}"
built=$(date +%s.%N)

CHECK="$BUILD/neon_kernel_check"
run() {  # run QEMU_CPU TRINE_ISA(- for unset) ARGS...
  local cpu="$1" isa="$2"
  shift 2
  local qemu=(qemu-aarch64 -L "$SYSROOT")
  [ "$cpu" != default ] && qemu+=(-cpu "$cpu")
  echo "== qemu-aarch64 cpu=$cpu TRINE_ISA=$isa $*"
  if [ "$isa" = - ]; then
    env -u TRINE_ISA "${qemu[@]}" "$CHECK" "$@"
  else
    TRINE_ISA="$isa" "${qemu[@]}" "$CHECK" "$@"
  fi
}
run default neon --expect-isa neon
run default - --expect-isa neon --no-kernels
run cortex-a72 neon --expect-isa ref --expect-isa-error --no-kernels
run default ref --expect-isa ref --no-kernels
done_at=$(date +%s.%N)
awk -v s="$start" -v b="$built" -v e="$done_at" \
  'BEGIN { printf "test-neon.sh: passed (build %.1fs, qemu runs %.1fs)\n", b - s, e - b }'

if [ "$FULL" = 1 ]; then
  FULL_BUILD="$BUILD-full"
  mkdir -p "$FULL_BUILD"
  cmake -S "$ROOT" -B "$FULL_BUILD" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchain-aarch64.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DTRINE_WERROR="$WERROR" -DTRINE_BUILD_BENCH=OFF -DTRINE_BUILD_EXAMPLES=OFF \
    >"$FULL_BUILD/configure.log" 2>&1 ||
    { cat "$FULL_BUILD/configure.log" >&2; echo "test-neon.sh --full: arm64 PCRE2/GoogleTest missing? see the header of $0" >&2; exit 1; }
  cmake --build "$FULL_BUILD" -j"${TRINE_NEON_JOBS:-1}" --target kernels_test model_test
  for t in kernels_test model_test; do
    echo "== qemu-aarch64 TRINE_ISA=neon $t"
    (cd "$ROOT" && TRINE_ISA=neon qemu-aarch64 -L "$SYSROOT" "$FULL_BUILD/tests/$t" --gtest_brief=1)
  done
  full_at=$(date +%s.%N)
  awk -v s="$done_at" -v e="$full_at" 'BEGIN { printf "test-neon.sh --full: passed (%.1fs)\n", e - s }'
fi
