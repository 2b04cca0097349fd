#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_install.sh — kiln as its users get it: installs the build to a
# temporary prefix and checks what landed there:
#   1. the files (kiln.h, libkiln.so.0.1.0 and its links, libkiln.a, bin/kiln,
#      the CMake package, kiln.pc, the bundle when it was built);
#   2. libkiln.so's versioned SONAME (readelf -d);
#   3. libkiln.a defines everything libkiln.so exports, and needs no other
#      kiln archive;
#   4. a project finding kiln with find_package links kiln::kiln and
#      kiln::kiln_static, builds and runs (tests/install/consumer/);
#   5. the same program built with pkg-config, shared and static, runs;
#   6. the examples, copied out of the tree, build against the prefix and run;
#   7. libkiln.so needs no NVRTC, libcuda or cuBLAS at load time (NEEDED):
#      a bundle-only deployment needs only the driver.
# Without a driver every program must fail kiln_context_create with a
# message, or skip, and never crash.
#
#   test_install.sh BUILD_DIR CMAKE C_COMPILER GENERATOR BUNDLE(ON|OFF)
set -uo pipefail
build=${1:?usage: test_install.sh BUILD_DIR CMAKE C_COMPILER GENERATOR BUNDLE}
cmake=${2:?} cc=${3:?} gen=${4:?} bundle=${5:?}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
# Runs a program; prints its output; a crash or a non-zero exit is a failure.
run() {
  local what=$1; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  sed 's/^/    /' <<<"$out"
  if [ $rc -ne 0 ]; then fail "$what exited $rc"; else ok "$what runs"; fi
}

if ! "$cmake" --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"
  echo "FAIL: cmake --install $build --prefix $prefix"
  exit 1
fi

# 1. the files.  The library folder is GNUInstallDirs' (lib, lib64, lib/<triplet>).
so=$(find "$prefix" -name 'libkiln.so.*.*.*' | head -n 1)
[ -n "$so" ] || { echo "FAIL: no libkiln.so.X.Y.Z under $prefix"; find "$prefix"; exit 1; }
libdir=$(dirname "$so")
for f in include/kiln.h bin/kiln share/doc/kiln/LICENSE; do
  [ -f "$prefix/$f" ] || fail "$f not installed"
done
for f in libkiln.a cmake/kiln/kilnConfig.cmake cmake/kiln/kilnConfigVersion.cmake \
         cmake/kiln/kilnTargets.cmake pkgconfig/kiln.pc; do
  [ -f "$libdir/$f" ] || fail "${libdir#"$prefix"/}/$f not installed"
done
[ "$(readlink "$libdir/libkiln.so")" = libkiln.so.0 ] || fail "libkiln.so does not point to libkiln.so.0"
[ "$(readlink "$libdir/libkiln.so.0")" = "$(basename "$so")" ] ||
  fail "libkiln.so.0 does not point to $(basename "$so")"
version=$("$prefix/bin/kiln" --version 2>&1) || fail "installed kiln --version: $version"
ok "installed kiln: $version"
if [ "$bundle" = ON ]; then
  kb=$prefix/share/kiln/kiln-sm_90a.kbundle
  if [ -f "$kb" ]; then
    "$prefix/bin/kiln" bundle verify "$kb" > "$tmp/verify.log" 2>&1 ||
      { cat "$tmp/verify.log"; fail "the installed bundle does not verify"; }
    ok "bundle: $(tail -n 1 "$tmp/verify.log")"
  else
    fail "share/kiln/kiln-sm_90a.kbundle not installed"
  fi
fi

# 2. the SONAME
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" = libkiln.so.0 ]; then ok "SONAME $soname"; else fail "SONAME is '$soname', not libkiln.so.0"; fi

# 3. one static archive with everything the shared library holds
nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' |
  grep -vE '^(_init|_fini|_edata|_end|__bss_start)$' | sort -u > "$tmp/so.syms"
nm -g --defined-only "$libdir/libkiln.a" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/a.syms"
nm -g --undefined-only "$libdir/libkiln.a" 2>/dev/null | awk '$1 == "U" { print $2 }' |
  grep '^kiln_' | sort -u > "$tmp/a.undef"
lacking=$(comm -23 "$tmp/so.syms" "$tmp/a.syms")
[ -z "$lacking" ] || fail "libkiln.a lacks what libkiln.so exports: $(echo $lacking)"
unresolved=$(comm -23 "$tmp/a.undef" "$tmp/a.syms")
[ -z "$unresolved" ] || fail "libkiln.a needs kiln symbols it does not define: $(echo $unresolved)"
[ -z "$lacking$unresolved" ] && ok "libkiln.a: $(wc -l < "$tmp/a.syms") symbols, all of libkiln.so's $(wc -l < "$tmp/so.syms")"

# 4. find_package
if "$cmake" -S "$here/consumer" -B "$tmp/cmake" -G "$gen" -DCMAKE_C_COMPILER="$cc" \
     -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/cmake.log" 2>&1 &&
   "$cmake" --build "$tmp/cmake" >> "$tmp/cmake.log" 2>&1; then
  run "find_package consumer (kiln::kiln)" "$tmp/cmake/consumer"
  run "find_package consumer (kiln::kiln_static)" "$tmp/cmake/consumer_static"
  readelf -d "$tmp/cmake/consumer_static" | grep -q 'NEEDED.*libkiln' &&
    fail "consumer_static loads libkiln.so"
else
  cat "$tmp/cmake.log"; fail "the find_package consumer does not build"
fi

# 5. pkg-config: shared, then static (-l:libkiln.a and Libs.private)
export PKG_CONFIG_PATH=$libdir/pkgconfig
if ! command -v pkg-config > /dev/null; then
  fail "pkg-config is not installed (apt-get install pkgconf)"
elif pc_flags=$(pkg-config --cflags --libs kiln) && pc_static=$(pkg-config --static --libs kiln); then
  pc_libdir=$(pkg-config --variable=libdir kiln)
  # shellcheck disable=SC2086  # flags are words
  if "$cc" -o "$tmp/pc_consumer" "$here/consumer.c" $pc_flags -Wl,-rpath,"$pc_libdir"; then
    run "pkg-config consumer (libkiln.so)" "$tmp/pc_consumer"
  else
    fail "the pkg-config consumer does not build ($pc_flags)"
  fi
  static_libs=$(sed 's/-lkiln\b/-l:libkiln.a/' <<<"$pc_static")
  rpaths=$(tr ' ' '\n' <<<"$static_libs" | sed -n 's/^-L\(.*\)/-Wl,-rpath,\1/p' | tr '\n' ' ')
  # shellcheck disable=SC2086
  if "$cc" -o "$tmp/pc_static" "$here/consumer.c" $(pkg-config --cflags kiln) $static_libs $rpaths; then
    run "pkg-config consumer (libkiln.a, $static_libs)" "$tmp/pc_static"
  else
    fail "the static pkg-config consumer does not build ($static_libs)"
  fi
else
  fail "pkg-config does not find kiln in $PKG_CONFIG_PATH"
fi

# 6. the examples, out of the tree: kiln.h and their own folder only
mkdir -p "$tmp/examples"
cp "$root"/examples/*.c "$root"/examples/*.h "$tmp/examples/" 2>/dev/null
for src in "$tmp"/examples/*.c; do
  name=$(basename "$src" .c)
  # shellcheck disable=SC2086
  if "$cc" -std=c11 -Wall -Werror -o "$tmp/examples/$name" "$src" ${pc_flags:-} \
       -Wl,-rpath,"$libdir" -lm; then
    run "example $name (built out of the tree)" "$tmp/examples/$name"
  else
    fail "example $name does not build out of the tree against the installed kiln"
  fi
done

# 7. nothing of CUDA is needed to load libkiln.so: the runtime opens the
# driver, cuBLASLt and NVRTC with dlopen.
needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
case " $needed" in
  *" libnvrtc"* | *" libcuda"* | *" libcublas"*)
    fail "libkiln.so needs CUDA libraries to load (NEEDED: $needed)" ;;
  *) ok "libkiln.so NEEDED: $needed" ;;
esac

if [ $failures -gt 0 ]; then
  echo "install test: $failures failures"
  exit 1
fi
echo "install test: all passed"
