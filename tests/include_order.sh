#!/usr/bin/env bash
# Keeps the core's modules in one-way order: every #include "X.h" of
# alloc/*.c and alloc/*.h must name a module on a line above the
# including module's own in the list of alloc/internal.h (between
# "include-order:" and "end-include-order"). A module is a basename:
# alloc/pool.c and alloc/pool.h are "pool". Headers of no module in the
# folder (core.h, backend.h, cudalloc.h) are interfaces from outside and
# are not checked. Fails, naming each offending include and any cycle.
#   tests/include_order.sh [folder]   (default: alloc)
set -u
dir=${1:-alloc}
order_file=$dir/internal.h
[ -f "$order_file" ] || { echo "include_order: no $order_file" >&2; exit 2; }

# module -> level, from the documented order (one level per line).
declare -A level
n=0
while read -r line; do
  n=$((n + 1))
  for m in $line; do level[$m]=$n; done
done < <(sed -n '/include-order:/,/end-include-order/{/include-order:/d;/end-include-order/d;s/^[[:space:]]*\*[[:space:]]*//;p}' "$order_file")
[ "$n" -gt 0 ] || { echo "include_order: no include-order list in $order_file" >&2; exit 2; }

bad=0
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
for f in "$dir"/*.c "$dir"/*.h; do
  [ -f "$f" ] || continue
  m=$(basename "$f"); m=${m%.*}
  if [ -z "${level[$m]:-}" ]; then
    echo "include_order: $f: module '$m' is not in the order of $order_file" >&2
    bad=1
    continue
  fi
  while read -r inc; do
    h=${inc##*/}; h=${h%.h}
    [ "$h" = "$m" ] && continue
    [ -f "$dir/$h.c" ] || [ -f "$dir/$h.h" ] || continue   # an interface from outside
    echo "$m $h" >> "$edges"
    if [ -z "${level[$h]:-}" ] || [ "${level[$h]}" -ge "${level[$m]}" ]; then
      echo "include_order: $f includes \"$inc\": '$h' is not below '$m' in $order_file" >&2
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done

# A cycle is a subset of the above; name its members for the reader.
if ! tsort "$edges" > /dev/null 2> "$edges.loop"; then
  echo "include_order: the modules include each other in a cycle:" >&2
  grep -v 'input contains a loop' "$edges.loop" | sed 's/^tsort: /  /' >&2
  bad=1
fi
rm -f "$edges.loop"
[ "$bad" = 0 ] && echo "include_order: $dir: every include goes down the order of $order_file"
exit "$bad"
