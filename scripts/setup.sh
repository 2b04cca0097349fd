#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what the build needs (Debian 12 packages) and configures + builds
# kiln into build/.  Safe to run again: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs="cmake ninja-build gcc pkgconf liblua5.4-dev libyaml-dev libcmocka-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq $missing
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] && [ ! -f /usr/local/cuda/include/nvrtc.h ]; then
  echo "setup: the CUDA 13 toolkit is expected in /usr/local/cuda (NVRTC headers and library)" >&2
  exit 1
fi

werror=OFF
[ "${CI:-}" = true ] && werror=ON
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=$werror \
  -DCUDAToolkit_ROOT=/usr/local/cuda >/dev/null
ninja -C build
