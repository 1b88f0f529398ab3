#!/usr/bin/env bash
# Installs the Debian 12 packages trine needs. Idempotent: packages already present are skipped,
# and nothing is downloaded at build time afterwards.
#   scripts/install-deps.sh           what building and running need (the compiler, CMake, oneDNN,
#                                     xsimd, OpenMP, cxxopts, nlohmann-json, PCRE2, cpp-httplib)
#   scripts/install-deps.sh --tests   also what the tests and benchmarks need (scripts/ci.sh)
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libdnnl-dev libxsimd-dev libomp-dev
  libcxxopts-dev nlohmann-json3-dev libpcre2-dev
  libcpp-httplib-dev  # trine serve's HTTP (what llama-server uses)
  libedit-dev  # trine chat's line editing and history
)
TEST_PACKAGES=(
  libgtest-dev libgmock-dev libbenchmark-dev
  g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user  # the NEON kernels, cross-built and run
  clang-14 libclang-rt-14-dev llvm-14  # the sanitizer + libFuzzer build (scripts/ci.sh)
  chromium zlib1g-dev  # the report rendering test: headless Chromium, PNG decoding
  nginx  # the scale-out test: nginx in front of two trine serve replicas
  python3-jinja2  # the chat-template goldens are checked against Python's Jinja2
)
case "${1:-}" in
  "") ;;
  --tests) PACKAGES+=("${TEST_PACKAGES[@]}") ;;
  *) echo "usage: scripts/install-deps.sh [--tests]" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "trine: all ${1:+test and }build dependencies are installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "trine: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
