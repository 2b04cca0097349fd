#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# no_driver_needed.sh BUILD_DIR — no binary kiln builds (the command, the
# catalog generator, libkiln.so, every test, example and the benchmark)
# has libcuda.so.1 in its NEEDED list.  kiln opens the driver (and NVRTC,
# cuBLASLt) with dlopen so that it builds, tests and packs bundles on
# machines with no driver; a link line that names the driver stub (as
# CUDA::nvrtc and CUDA::cudart do through CUDA::cuda_driver) breaks that as
# soon as the linker keeps every library it is given (clang, gcc with
# sanitizers, -Wl,--no-as-needed).
set -u
build=${1:?usage: no_driver_needed.sh BUILD_DIR}
fail=0
checked=0
seen_kiln=0
seen_lib=0
while IFS= read -r -d '' f; do
    # ELF files only (scripts, objects and archives are not linked outputs).
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    needed=$(readelf -d "$f" 2>/dev/null | grep '(NEEDED)') || continue
    checked=$((checked + 1))
    case $f in
        */kiln) seen_kiln=1 ;;
        */libkiln.so*) seen_lib=1 ;;
    esac
    if echo "$needed" | grep -q 'libcuda\.so'; then
        echo "$f needs the driver:"; echo "$needed" | sed 's/^/  /'
        fail=1
    fi
done < <(find "$build" -path '*/CMakeFiles' -prune -o -type f \( -perm -u+x -o -name '*.so*' \) -print0)
if [ $seen_kiln = 0 ] || [ $seen_lib = 0 ]; then
    echo "no_driver_needed.sh: build/kiln or libkiln.so not found under $build"
    exit 1
fi
[ $fail = 0 ] && echo "$checked binaries under $build: none needs libcuda.so.1"
exit $fail
