#!/bin/sh
# Two builds of cudalloc timed side by side in one process (bench/ab_pair.c):
# A = libcudalloc.a of BASE_REV (a worktree under $BUILD/ab/base), B = the
# working tree's. Each library becomes one relocatable object after link-time
# optimization; B's global symbols get the prefix B_. Figures, no verdict.
#
#   bench/ab_pair.sh BASE_REV [tiny|gpu|mix ...]       (default: all three)
#   BUILD=build/mine bench/ab_pair.sh HEAD~1 gpu       another build folder
#   AB_ROUNDS=40 bench/ab_pair.sh HEAD~1               more rounds (default 30)
#   bench/ab_pair.sh HEAD gpu/64:eq                    64 streams, 1,024 live blocks
set -eu
[ $# -ge 1 ] || { echo "usage: bench/ab_pair.sh BASE_REV [tiny|gpu|mix[/STREAMS:eq] ...]" >&2; exit 2; }
rev=$1
shift
seqs=${*:-tiny gpu mix}
cd "$(git rev-parse --show-toplevel)"
BUILD=${BUILD:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
ROUNDS=${AB_ROUNDS:-30}
root=$(pwd)
ab=$BUILD/ab
base=$ab/base
mkdir -p "$ab"
sha=$(git rev-parse --verify "$rev^{commit}")   # here: the base worktree's own HEAD is another

make -s -j2 BUILD="$BUILD" "$BUILD/libcudalloc.a"
if [ -e "$base/.git" ]; then
  git -C "$base" checkout -q --detach "$sha"
else
  git worktree add -f --detach "$base" "$sha" >/dev/null 2>&1
fi
# The base builds its own library; jemalloc (the host allocator inside) is the same build's.
mkdir -p "$base/build"
[ -e "$base/build/jemalloc" ] || ln -s "$root/$BUILD/jemalloc" "$base/build/jemalloc"
make -s -C "$base" -j2 BUILD=build build/libcudalloc.a   # BUILD names the working tree's folder, not the base's

relocatable() {
  gcc -flto=auto -O2 -r -flinker-output=nolto-rel -nostdlib -o "$2" -Wl,--whole-archive "$1" -Wl,--no-whole-archive
}
relocatable "$base/build/libcudalloc.a" "$ab/a.o"
relocatable "$BUILD/libcudalloc.a" "$ab/b-plain.o"
nm --defined-only -g "$ab/b-plain.o" | awk 'NF == 3 { print $3, "B_" $3 }' >"$ab/b.syms"
objcopy --redefine-syms="$ab/b.syms" "$ab/b-plain.o" "$ab/b.o"
cc -std=gnu11 -O2 -Wall -Wextra -Werror -I"$CUDA_HOME/include" -I"$BUILD/include" -Ibench -Ialloc/backend -Ialloc/backend/sim \
  bench/ab_pair.c "$ab/a.o" "$ab/b.o" -o "$ab/ab_pair" \
  -L"$CUDA_HOME/lib64" -lcudart -Wl,-rpath,"$CUDA_HOME/lib64" -ldl -lpthread -lm

echo "ab_pair: A = $rev ($(git -C "$base" rev-parse --short HEAD)), B = the working tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- alloc shim || echo ', changed'))"
pin=""
command -v taskset >/dev/null && pin="taskset -c 0"
for s in $seqs; do
  case $s in
  tiny*) n=200000 ;;
  *) n=100000 ;;
  esac
  $pin "$ab/ab_pair" "$s" "$n" "$ROUNDS" 2>/dev/null
done
