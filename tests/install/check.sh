#!/usr/bin/env bash
# `make install` as a packager runs it, and the installed library as a user
# finds it: install into a DESTDIR tree with PREFIX=/usr, build
# tests/install/app.c with `pkg-config --cflags --libs cudalloc` against the
# shared library and (--static) against the archive, run both on the
# simulated device; the same from the build tree with cudalloc-uninstalled.pc;
# then `make uninstall` must leave no file behind. Quiet when it passes; on a
# failure, the check that failed and its log.
# BUILD: the build folder (make test passes it); SAN: set under test-asan /
# test-tsan, where this check is skipped (the install does not depend on the
# sanitizer, and a sanitized archive needs the sanitizer's link flags).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
if [ -n "${SAN:-}" ]; then echo "install check: skipped under $SAN (make test runs it)"; exit 0; fi
command -v pkg-config >/dev/null || { echo "install check: pkg-config is not installed (tests/deps.sh)"; exit 1; }
CC=${CC:-cc}
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && cat "$log"; rm -rf "$tmp"' EXIT
log=$tmp/log
dest=$tmp/dest
lib=$dest/usr/lib
fail() {
  echo "install check FAILED: $*"
  cat "$log"
  exit 1
}
# Runs a command with its output in the log; fails the check with $1 if it fails.
step() {
  local what=$1
  shift
  echo "+ $*" >>"$log"
  "$@" >>"$log" 2>&1 || fail "$what"
}
# A program's output must show that it ran to its end and that cudalloc,
# started on the simulated device, wrote its exit summary.
ran_on_cudalloc() {
  local what=$1
  shift
  echo "+ $*" >>"$log"
  CUDALLOC_CONF=backend:sim "$@" >"$tmp/out" 2>&1
  local rc=$?
  cat "$tmp/out" >>"$log"
  [ $rc -eq 0 ] || fail "$what: exit status $rc"
  grep -q '^install_app: ok' "$tmp/out" || fail "$what: no 'install_app: ok'"
  grep -q '^cudalloc: summary (backend sim' "$tmp/out" || fail "$what: no exit summary"
}

step "make install" make --no-print-directory -s install BUILD="$BUILD" DESTDIR="$dest" PREFIX=/usr

# The shared library: its soname and the usual links.
readelf -d "$lib"/libcudalloc.so.0.*.* >"$tmp/dyn" 2>>"$log" || fail "readelf of the installed library"
grep -q 'SONAME.*\[libcudalloc\.so\.0\]' "$tmp/dyn" || fail "soname is not libcudalloc.so.0: $(grep SONAME "$tmp/dyn")"
[ "$(readlink "$lib/libcudalloc.so")" = libcudalloc.so.0 ] || fail "libcudalloc.so does not link to libcudalloc.so.0"
[ -e "$lib/libcudalloc.so.0" ] || fail "libcudalloc.so.0 does not lead to the library"
grep -qx 'prefix=/usr' "$lib/pkgconfig/cudalloc.pc" || fail "the installed cudalloc.pc does not name prefix /usr"

# The replay tool, installed beside the library, runs from there on a fixture.
"$dest/usr/bin/cudalloc-replay" --no-bisect tests/replay/tiny_snapshot.pickle >"$tmp/replay" 2>&1 ||
  fail "the installed cudalloc-replay: $(cat "$tmp/replay")"
grep -q '^device 1: 4 events' "$tmp/replay" || fail "the installed cudalloc-replay printed: $(cat "$tmp/replay")"

# pkg-config reads only the DESTDIR tree, and --define-prefix points
# ${prefix} there (the .pc itself names /usr, where a package installs it).
pc() { PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$lib/pkgconfig" pkg-config --define-prefix "$@" cudalloc; }
step "pkg-config --cflags --libs cudalloc" pc --cflags --libs
flags=$(pc --cflags --libs)
step "build against the shared library" $CC tests/install/app.c $flags -o "$tmp/app-shared"
readelf -d "$tmp/app-shared" | grep -q 'NEEDED.*\[libcudalloc\.so\.0\]' || fail "app-shared does not need libcudalloc.so.0"
ran_on_cudalloc "the shared build" env LD_LIBRARY_PATH="$lib" "$tmp/app-shared"

# The installed archive holds plain code only: GCC's LTO bytecode in it
# (the build's fat objects) would make another GCC's -flto link refuse it.
objdump -h "$lib/libcudalloc.a" >"$tmp/sections" 2>>"$log" || fail "objdump of the installed archive"
grep -q '\.gnu\.lto_' "$tmp/sections" && fail "the installed libcudalloc.a carries LTO bytecode"
grep -q '\.text' "$tmp/sections" || fail "the installed libcudalloc.a has no code"

# The archive: -static, because with libcudalloc.so beside it the linker
# would take the shared library; a fully static program also shows that
# Libs.private names every library the archive needs.
flags=$(pc --static --cflags --libs)
step "build against the archive" $CC tests/install/app.c $flags -static -o "$tmp/app-static"
if readelf -d "$tmp/app-static" 2>/dev/null | grep -q NEEDED; then fail "app-static needs shared libraries"; fi
ran_on_cudalloc "the static build" "$tmp/app-static"

# From the build tree, before any install.
pcu() { PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$BUILD" pkg-config "$@" cudalloc-uninstalled; }
flags=$(pcu --cflags --libs) || fail "pkg-config cudalloc-uninstalled"
step "build against the build tree" $CC tests/install/app.c $flags -o "$tmp/app-uninstalled"
ran_on_cudalloc "the build-tree build" env LD_LIBRARY_PATH="$BUILD" "$tmp/app-uninstalled"

step "make uninstall" make --no-print-directory -s uninstall BUILD="$BUILD" DESTDIR="$dest" PREFIX=/usr
left=$(find "$dest" ! -type d)
[ -z "$left" ] || fail "make uninstall left: $left"
# The build tree's cudalloc.pc back to the prefix of a plain make.
step "restore the build tree's cudalloc.pc" make --no-print-directory -s BUILD="$BUILD" "$BUILD/cudalloc.pc"
echo "install check: ok (install, an archive without LTO bytecode, cudalloc-replay, pkg-config shared and --static, uninstalled .pc, uninstall)"
