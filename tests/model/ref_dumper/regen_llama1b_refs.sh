#!/bin/bash
# Regenerates models/ref/llama-1b-l4-tq2_0.json and models/ref/llama-1b-l4-tq2_0-e8.json, the
# llama.cpp references of tests/model/llama1b_shape_parity_test.cc:
#   tests/model/ref_dumper/regen_llama1b_refs.sh BUILD/trine LLAMA_CPP_DIR
# LLAMA_CPP_DIR is a llama.cpp checkout built with CMake into LLAMA_CPP_DIR/build (libllama.so and
# the ggml libraries in build/bin; the committed files came from commit d32676d77, Release,
# GGML_NATIVE=ON on an AVX-512 Zen 4). The model files are made exactly as the test makes them;
# each JSON records the file's FNV-1a 64, which the test checks.
set -euo pipefail
trine=$(realpath "$1")
llama=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g++ -O2 -std=c++17 -I"$llama/include" -I"$llama/ggml/include" "$here/llama_ref_dump.cc" \
  -L"$llama/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$llama/build/bin" -o "$tmp/llama_ref_dump"
"$trine" mkmodel --preset llama-1b --layers 4 --type tq2_0 -t 2 -o "$tmp/llama-1b-l4-tq2_0.gguf"
"$trine" mkmodel --preset llama-1b --layers 4 --type tq2_0 --token-embedding-type q8_0 -t 2 \
  -o "$tmp/llama-1b-l4-tq2_0-e8.gguf"
for f in llama-1b-l4-tq2_0 llama-1b-l4-tq2_0-e8; do
  "$tmp/llama_ref_dump" "$tmp/$f.gguf" "$root/models/ref/$f.json"
done
