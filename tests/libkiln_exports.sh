#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# libkiln_exports.sh LIB HEADER — libkiln.so exports exactly the functions
# kiln.h declares (KILN_API), and needs no libnvrtc (NVRTC is loaded with
# dlopen, so a bundle-only deployment needs only the driver).
set -u
lib=$1
header=$2
fail=0
declared=$(grep -o '^KILN_API [^(]*(' "$header" | sed 's/.*[ *]\(kiln_[a-z0-9_]*\)($/\1/' | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^_' | sort -u)
extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
if [ -n "$extra" ]; then
    echo "$lib exports symbols kiln.h does not declare:"; echo "$extra" | sed 's/^/  /'
    fail=1
fi
if [ -n "$missing" ]; then
    echo "$lib lacks functions kiln.h declares:"; echo "$missing" | sed 's/^/  /'
    fail=1
fi
if readelf -d "$lib" | grep -q 'NEEDED.*libnvrtc'; then
    echo "$lib needs libnvrtc:"; readelf -d "$lib" | grep NEEDED
    fail=1
fi
[ $fail = 0 ] && echo "$lib: $(echo "$exported" | wc -l) exports, all in kiln.h; no libnvrtc needed"
exit $fail
