#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package's tests, as a user gets the package: a fresh venv,
# `pip install ./python` (libkiln.so and the sm_90a bundle built by the
# project's CMake through scikit-build-core, shipped inside the package),
# then pytest run from outside the checkout so that the installed package is
# the one imported.  Without torch the torch tests skip with the reason;
# without a GPU the GPU tests do.
#
#   scripts/python_test.sh [PYTEST_ARGS...]
#   KILN_PY_VENV=DIR      the venv to make (default: a temporary folder, removed)
#   KILN_PY_BUNDLE=OFF    skip packing the bundle (about 6 min of NVRTC on 2
#                         cores; seconds where the checkout's build/pack-cache
#                         holds the kernels: the package's build reuses it)
#   KILN_PY_TORCH=1       also pip install torch into the venv (large), and
#                         numpy, which Triton's interpreter needs (test_stream_peer)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
venv=${KILN_PY_VENV:-}
if [ -z "$venv" ]; then
  venv=$(mktemp -d "${TMPDIR:-/tmp}/kiln-py.XXXXXX")
  trap 'rm -rf "$venv"' EXIT
fi
bundle=${KILN_PY_BUNDLE:-ON}

"$py" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet pytest
if [ "${KILN_PY_TORCH:-0}" = 1 ]; then
  "$venv/bin/python" -m pip install --quiet torch numpy
fi
pack_cache=()
if [ "$bundle" = ON ] && [ -d "$root/build/pack-cache" ]; then
  pack_cache=(-C "cmake.define.KILN_PACK_CACHE=$root/build/pack-cache")
fi
echo "python_test: pip install ./python (bundle $bundle${pack_cache:+, packed from build/pack-cache})"
"$venv/bin/python" -m pip install --quiet "$root/python" \
  -C "cmake.define.KILN_BUILD_BUNDLE=$bundle" "${pack_cache[@]}"

expect_bundle=0
[ "$bundle" = ON ] && expect_bundle=1
cd "$venv"
KILN_EXPECT_BUNDLE=$expect_bundle "$venv/bin/python" -m pytest -rs "$root/python/tests" "$@"
