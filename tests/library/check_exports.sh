#!/usr/bin/env bash
# libdtrain.so is what other programs link: it exports the C ABI (dtrain_*) and nothing else, and
# carries its static dependencies inside, so ldd names none of protobuf, Boost, OpenBLAS or
# libjpeg. Fails naming each stray symbol or library.
#   check_exports.sh LIBDTRAIN_SO
set -euo pipefail
lib=$1
status=0
exports=$(nm -D --defined-only "$lib" | awk '{print $NF}')
count=$(wc -l <<<"$exports")
stray=$(grep -v '^dtrain_' <<<"$exports" || true)
if [[ -n $stray ]]; then
  echo "FAIL: $lib exports symbols outside the C ABI:"
  head -20 <<<"$stray"
  status=1
fi
deps=$(ldd "$lib")
bad=$(grep -Ei 'protobuf|boost|openblas|libjpeg|turbojpeg|gfortran' <<<"$deps" || true)
if [[ -n $bad ]]; then
  echo "FAIL: $lib loads libraries it should carry inside:"
  echo "$bad"
  status=1
fi
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if [[ ! $soname =~ ^libdtrain\.so\.[0-9]+$ ]]; then
  echo "FAIL: SONAME '$soname' is not libdtrain.so.<ABI version>"
  status=1
fi
((status == 0)) && echo "check_exports: $count symbols, all dtrain_*; SONAME $soname; no protobuf, Boost, OpenBLAS or libjpeg"
exit $status
