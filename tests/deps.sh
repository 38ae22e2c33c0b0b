#!/usr/bin/env bash
# Makes sure the build and test dependencies are there: Criterion (the test framework),
# jemalloc and mimalloc (the benchmarks' references), elfutils' libdw (call
# sites by function, file and line), pkg-config (the install check) and
# python3 (bench/ranks/ranks_table.py, the ctypes example of reports.md, and the
# replay tests' independent reading of PyTorch snapshots).
# Installs them with apt-get when they are missing and this user may;
# otherwise says what to install.
set -u
need=()
[ -f /usr/include/criterion/criterion.h ] || need+=(libcriterion-dev)
[ -f /usr/include/jemalloc/jemalloc.h ] || need+=(libjemalloc-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
[ -f /usr/include/elfutils/libdw.h ] || need+=(libdw-dev)
[ -f /usr/include/mimalloc.h ] || need+=(libmimalloc-dev)
command -v python3 >/dev/null 2>&1 || need+=(python3)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO=sudo
if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$SUDO" ]; }; then
  echo "installing ${need[*]}"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" && exit 0
fi
echo "missing test dependencies: ${need[*]} (apt-get install ${need[*]})" >&2
exit 1
