#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# spdx.sh — gives every source file (C, headers, CUDA, Lua, shell, Python,
# CMake) an SPDX-License-Identifier line, in the file's own comment syntax:
#   scripts/spdx.sh           add the line where it is missing (running it
#                             again changes nothing)
#   scripts/spdx.sh --check   list the files without one; exit 1 if any
# Both take FILE... to look at those files only (paths from the top folder),
# instead of every file git tracks or would track.
# The line goes first, or after a `#!` line (and a Python coding line).
# Files matched by a `path = [...]` of REUSE.toml are left alone: they are
# pasted verbatim into generated kernels or are test fixtures, and REUSE.toml
# states their license instead (see the comment there).
set -euo pipefail
cd "$(dirname "$0")/.."

license=Apache-2.0
tag="SPDX-License-Identifier:"
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
case ${1:-} in
  -*) echo "usage: scripts/spdx.sh [--check] [FILE...]" >&2; exit 2 ;;
esac

# The globs of REUSE.toml's annotations (one `path = [...]` line each).
skip=()
if [ -f REUSE.toml ]; then
  while IFS= read -r g; do skip+=("$g"); done < <(
    sed -n 's/^path *= *\[\(.*\)\]/\1/p' REUSE.toml | tr ',' '\n' |
      sed -n 's/^ *"\([^"]*\)" *$/\1/p')
fi

skipped() {
  local g
  for g in "${skip[@]}"; do
    # shellcheck disable=SC2053  # the glob is meant to match
    [[ $1 == $g ]] && return 0
  done
  return 1
}

# The comment that carries the line, by file name; empty: not a source file.
comment_for() {
  case $1 in
    *.c | *.h | *.cu | *.cuh) echo "/* $tag $license */" ;;
    *.lua) echo "-- $tag $license" ;;
    *.sh | *.py | *.cmake | *.cmake.in | CMakeLists.txt | */CMakeLists.txt)
      echo "# $tag $license" ;;
  esac
}

# The line sits in the first few lines; a mention further down (this script
# names the tag in its code) does not count.
has_line() { head -n 5 "$1" | grep -q "$tag"; }

add_line() {
  local f=$1 line=$2 tmp
  tmp=$(mktemp)
  awk -v line="$line" -v py="$([[ $f == *.py ]] && echo 1 || echo 0)" '
    NR == 1 && /^#!/ { print; next }
    !done && py && NR <= 2 && /^#.*coding[:=]/ { print; next }
    !done { print line; done = 1 }
    { print }
    END { if (!done) print line }' "$f" > "$tmp"
  cat "$tmp" > "$f" # rewrite in place: keeps the file's mode
  rm -f "$tmp"
}

missing=0
changed=0
# Tracked files and new ones git does not ignore (build folders are ignored).
while IFS= read -r f; do
  [ -f "$f" ] || continue
  line=$(comment_for "$f")
  [ -n "$line" ] || continue
  skipped "$f" && continue
  has_line "$f" && continue
  if [ $check = 1 ]; then
    echo "$f: no $tag line"
    missing=$((missing + 1))
  else
    add_line "$f" "$line"
    changed=$((changed + 1))
  fi
done < <(if [ $# -gt 0 ]; then printf '%s\n' "$@"; else
           git ls-files --cached --others --exclude-standard | sort -u; fi)

if [ $check = 1 ]; then
  if [ $missing -gt 0 ]; then
    echo "spdx: $missing source files without an SPDX line (scripts/spdx.sh adds them)" >&2
    exit 1
  fi
  echo "spdx: every source file has an SPDX line"
else
  echo "spdx: added the line to $changed files"
fi
