#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copies what scripts/gpu_all.sh needs from a build folder into DIR, in the
# same layout, so a GPU machine gets the binaries and the bundle without the
# whole build folder (object files, the pack cache):
#   scripts/gpu_stage.sh build .devrun/build [.devrun/kiln.txz]
# With ARCHIVE, DIR is also packed into it with xz (unpack there with
# `tar xJf ARCHIVE -C /tmp`): the binaries share most of their bytes, so
# it is about 3.5 MB where DIR is 150-210 MB and a gzip of it 45 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: scripts/gpu_stage.sh BUILD_DIR DEST_DIR [ARCHIVE.txz]}
dst=${2:?usage: scripts/gpu_stage.sh BUILD_DIR DEST_DIR [ARCHIVE.txz]}
archive=${3:-}
rm -rf "$dst"
mkdir -p "$dst"
copy() { # path relative to the build folder
  [ -e "$src/$1" ] || return 0
  mkdir -p "$dst/$(dirname "$1")"
  cp -a "$src/$1" "$dst/$1"
}
copy kiln
copy kiln-sm_90a.kbundle
for f in "$src"/tests/gpu/* "$src"/examples/* "$src"/runtime/libkiln.so*; do
  [ -f "$f" ] || [ -L "$f" ] || continue
  copy "${f#"$src"/}"
done
copy tests/unit/test_validate
copy tests/unit/libcmocka.so.0
copy bench/kiln_bench
copy bench/quant_bench
# Debug info stays here: the copies travel (the device tool sends 64 MiB).
find "$dst" -type f ! -name '*.kbundle' ! -name '*.cmake' -exec strip --strip-debug {} + 2>/dev/null || true
find "$dst" -name '*.cmake' -delete
echo "gpu_stage: $(du -sh "$dst" | cut -f1) in $dst"
if [ -n "$archive" ]; then
  tar cf - -C "$(dirname "$dst")" "$(basename "$dst")" | xz -T0 -6 > "$archive"
  echo "gpu_stage: $(du -sh "$archive" | cut -f1) in $archive"
fi
