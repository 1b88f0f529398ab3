#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzzer build for a bounded time, two at a time, and fails on
# any crash, sanitizer report, leak, timeout (> 10 s on one input), out-of-memory (> 2 GB) or, for
# the two model-file targets, any single allocation over 512 MB (nothing may allocate from a count
# in the file that the file cannot back).
# Usage: scripts/fuzz.sh BUILD_DIR [SECONDS_PER_TARGET (default 45)]
# The checked-in corpora (tests/fuzz/corpus/<target>) seed each run; new inputs go to a temporary
# directory, so the source tree is not modified. A failing input is kept in $TRINE_FUZZ_OUT
# (default: a temporary directory) and its path printed; add it to the corpus as a regression test.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/fuzz.sh BUILD_DIR [SECONDS]}
secs=${2:-45}
out=${TRINE_FUZZ_OUT:-$(mktemp -d /tmp/trine-fuzz.XXXXXX)}
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

run_one() {
  local t=$1 exe="$build/tests/fuzz/${1}_fuzz" work="$out/$1"
  mkdir -p "$work/corpus" "$work/artifacts"
  if [ ! -x "$exe" ]; then
    echo "fuzz: $exe missing (configure with -DTRINE_BUILD_FUZZERS=ON, clang)" >"$work/log"
    return 1
  fi
  local extra=()
  case $t in gguf_reader | model_api) extra=(-malloc_limit_mb=512) ;; esac
  local seeds=()
  [ "$t" = jinja ] && seeds=(tests/data/chat_templates)  # the real templates seed the interpreter
  "$exe" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 "${extra[@]}" -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" "tests/fuzz/corpus/$t" "${seeds[@]}" >"$work/log" 2>&1
}

targets=(gguf_reader model_api tokenizer chat_template plan_json openai_request jinja)
status=0
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  pids=()
  for t in "${targets[@]:i:2}"; do
    run_one "$t" &
    pids+=("$!:$t")
  done
  for p in "${pids[@]}"; do
    t=${p#*:}
    if wait "${p%%:*}"; then
      runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$t/log" | grep -o '[0-9]*$')
      echo "fuzz: $t ok, ${runs:-?} executions in ${secs} s"
    else
      status=1
      echo "fuzz: $t FAILED; log: $out/$t/log"
      tail -n 40 "$out/$t/log"
      ls "$out/$t/artifacts" 2>/dev/null | sed "s|^|fuzz:   input: $out/$t/artifacts/|"
    fi
  done
done
exit $status
