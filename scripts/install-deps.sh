#!/usr/bin/env bash
# Installs trine's build and test dependencies from Debian 12 packages. Idempotent: packages already
# present are skipped by apt-get, and nothing is downloaded at build time afterwards.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libdnnl-dev libxsimd-dev libomp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcxxopts-dev nlohmann-json3-dev libpcre2-dev
  libcpp-httplib-dev  # trine serve's HTTP (what llama-server uses)
  g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
  clang-14 libclang-rt-14-dev llvm-14  # the sanitizer + libFuzzer build (scripts/ci.sh)
  chromium zlib1g-dev  # the report rendering test: headless Chromium, PNG decoding
  nginx  # the scale-out test: nginx in front of two trine serve replicas
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "trine: all build dependencies are installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "trine: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
