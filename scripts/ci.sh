#!/usr/bin/env bash
# Everything CI checks (.ci/run calls this; it is the README's test command). Stops at the first
# failure. Stages, all by default, or name some: scripts/ci.sh release sanitize fuzz
#   release   gcc Release build with -Werror, then the whole ctest suite              (build/)
#   sanitize  clang 14 build with AddressSanitizer + UndefinedBehaviorSanitizer (halt on the
#             first error, leaks detected) and the libFuzzer targets, then the ctest suite
#             minus the long numeric runs in SANITIZE_SKIP (the release stage runs them; their
#             code paths run under the sanitizers in the shorter parity tests)  (build-asan/)
#   fuzz      every libFuzzer target for TRINE_FUZZ_SECONDS (default 45) each (scripts/fuzz.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(release sanitize fuzz)
want() { [[ " ${stages[*]} " == *" $1 "* ]]; }

# PlanLoad.PeakRss* measures the process's peak RSS against a budget: ASan's shadow memory and
# quarantine are part of the RSS there, so it only means something in the release build.
SANITIZE_SKIP='Perplexity\.|^parity_isa_|^perplexity_isa_|^neon_kernels_qemu$|^RealProfile\.|^ProfileCli\.CacheHitMiss|^PlanLoad\.PeakRss'
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

./scripts/install-deps.sh --tests
if want release; then
  echo "== ci: release build and tests"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTRINE_WERROR=ON
  cmake --build build -j2
  ctest --test-dir build --output-on-failure -j2
fi
if want sanitize || want fuzz; then
  echo "== ci: sanitizer + fuzzer build (clang 14)"
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTRINE_SANITIZE=ON -DTRINE_BUILD_FUZZERS=ON -DTRINE_WERROR=ON -DTRINE_BUILD_BENCH=OFF
  cmake --build build-asan -j2
fi
if want sanitize; then
  echo "== ci: tests under ASan + UBSan (skipping: $SANITIZE_SKIP)"
  ctest --test-dir build-asan --output-on-failure -j2 -E "$SANITIZE_SKIP"
fi
if want fuzz; then
  echo "== ci: fuzzing, ${TRINE_FUZZ_SECONDS:-45} s per target"
  ./scripts/fuzz.sh build-asan "${TRINE_FUZZ_SECONDS:-45}"
fi
echo "== ci: all stages passed (${stages[*]})"
