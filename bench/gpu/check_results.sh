#!/usr/bin/env bash
# Checks that a folder written by bench/gpu-check.sh holds complete results:
#
#   bench/gpu/check_results.sh DIR
#
# - summary.md, machine.txt and logs.tar.gz are there and not empty;
# - summary.md has a row for every section (bench/gpu-check.sh --sections), and
#   in a dry run every row says its CPU part passed;
# - logs.tar.gz holds one log for every command summary.md shows ("$ ...");
# - the driver probe's log names every entry point alloc/backend/cuda_entries.h lists (what cuda.c resolves)
#   (so that a call added to the backend cannot go unprobed).
# Prints what is wrong and exits 1, or "check_results: ok" and 0.
# BACKEND_SRC: the backend source to compare with (default alloc/backend/cuda_entries.h, the list cuda.c resolves).
set -u
cd "$(dirname "$0")/../.." || exit 1
dir=${1:?usage: bench/gpu/check_results.sh DIR}
src=${BACKEND_SRC:-alloc/backend/cuda_entries.h}
problems=0
problem() { echo "check_results: $*"; problems=$((problems + 1)); }

for f in summary.md machine.txt logs.tar.gz; do
  [ -s "$dir/$f" ] || problem "$dir/$f is missing or empty"
done
[ "$problems" -eq 0 ] || exit 1

dry=0
grep -q '^mode: dry run' "$dir/machine.txt" && dry=1
for s in $(bash bench/gpu-check.sh --sections); do
  row=$(grep "^| $s | " "$dir/summary.md")
  if [ -z "$row" ]; then problem "summary.md has no row for section $s"
  elif [ "$dry" -eq 1 ] && [ "${row#*| dry run: CPU part ok |}" = "$row" ]; then problem "dry run, section $s: $row"
  fi
done

listing=$(tar tzf "$dir/logs.tar.gz") || { problem "logs.tar.gz cannot be read"; exit 1; }
commands=$(grep -c '^\$ ' "$dir/summary.md")
logs=$(grep -c '/[0-9][0-9]-[a-z_]*\.log$' <<< "$listing")
[ "$commands" -eq "$logs" ] || problem "summary.md shows $commands commands, logs.tar.gz has $logs step logs"

driver_log=$(grep -- '-driver\.log$' <<< "$listing" | head -1)
if [ -z "$driver_log" ]; then
  problem "logs.tar.gz has no driver probe log"
else
  entries=$(tar xzf "$dir/logs.tar.gz" -O "$driver_log" | sed -n 's/^entry \(cu[A-Za-z_0-9]*\): .*/\1/p')
  for sym in $(sed -n 's/^ *X([a-z_]*, "\(cu[A-Za-z_0-9]*\)".*/\1/p' "$src"); do
    grep -qx "$sym" <<< "$entries" || problem "the driver probe does not probe $sym, which $src resolves"
  done
fi

[ "$problems" -eq 0 ] || exit 1
echo "check_results: ok ($dir: $(grep -c '^| ' "$dir/summary.md") table rows, $logs step logs)"
