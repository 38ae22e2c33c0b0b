#!/bin/sh
# Builds the jemalloc of the pinned host-memory cache from Debian's source
# package (bookworm's jemalloc_5.3.0-1), not from Debian's binary archive:
# that archive keeps jemalloc's per-thread state (2.6 KiB) in initial-exec
# TLS, which makes dlopen() of libcudalloc.so fail ("cannot allocate memory
# in static TLS block"). With --disable-initial-exec-tls, and no
# initial-exec variable in the shim either (shim/guard.h), the library has
# no STATIC_TLS flag and dlopen works without GLIBC_TUNABLES (tested by
# preload.dlopen_needs_no_static_tls). --disable-tls is no way out (on
# Linux jemalloc's configure forces TLS on): the configured header loses its
# JEMALLOC_TLS instead (below).
#
# usage: fetch-build.sh DIR   -> DIR/lib/libjemalloc_pic.a
# The apt configuration is private to DIR (a sources file and lists under
# DIR/apt); /etc/apt is left as it is. The result is also cached outside the
# tree (below).
set -eu
dir=$1
version=5.3.0
mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/src" "$dir/lib"
dir=$(cd "$dir" && pwd)
# The built archive is also kept outside the tree, as ccache keeps objects,
# keyed by this script and the compiler: another clean clone on the same
# machine then copies it instead of fetching and building for two minutes.
# CUDALLOC_CACHE=off keeps nothing.
cache_root=${CUDALLOC_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/cudalloc}
key=$( { cat "$0"; ${CC:-cc} --version 2>/dev/null | head -n 1; } | sha256sum | cut -c1-16)
cached="$cache_root/jemalloc-$version-$key/libjemalloc_pic.a"
if [ "$cache_root" != off ] && [ -f "$cached" ]; then
	cp "$cached" "$dir/lib/libjemalloc_pic.a.tmp"
	mv "$dir/lib/libjemalloc_pic.a.tmp" "$dir/lib/libjemalloc_pic.a"
	exit 0
fi
cat > "$dir/apt/sources.list" <<SRC
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
SRC
apt_opts="-o Dir::Etc::sourcelist=$dir/apt/sources.list -o Dir::Etc::sourceparts=- \
 -o Dir::State::Lists=$dir/apt/lists -o Dir::Cache=$dir/apt/cache -o APT::Sandbox::User=root -q"
tarball=$(ls "$dir"/src/jemalloc_$version.orig.tar.* 2>/dev/null | head -n 1 || true)
if [ -z "$tarball" ]; then
	# shellcheck disable=SC2086
	apt-get $apt_opts update >/dev/null
	# shellcheck disable=SC2086
	(cd "$dir/src" && apt-get $apt_opts source --download-only jemalloc=$version-1)
	tarball=$(ls "$dir"/src/jemalloc_$version.orig.tar.* | head -n 1)
fi
rm -rf "$dir/jemalloc-$version"
tar -xf "$tarball" -C "$dir"
cd "$dir/jemalloc-$version"
# Every symbol ca_je_ (the API by the prefix, the internals by the private
# namespace), so the copy never stands in for the program's malloc. No
# docs, no C++ operators: it serves cudalloc's C code alone. Stats stay:
# tests read them through mallctl. The archive is built PIC anyway
# (libjemalloc_pic.a).
./configure -q --with-jemalloc-prefix=ca_je_ --with-private-namespace=ca_je_ \
	--disable-initial-exec-tls --disable-cxx --disable-shared \
	--disable-doc --prefix="$dir" >/dev/null
# No thread-locals at all: jemalloc's 2.6 KiB of per-thread state goes to the
# heap behind a pthread key (its tsd_generic), so that libcudalloc.so's TLS
# stays within what glibc hands a dlopen'd library as static TLS (512 bytes:
# a thread-local is then one load, not a _dl_tlsdesc_dynamic call). The
# pinned cache alone calls this jemalloc, never the hot path.
sed -i '/^#define JEMALLOC_TLS $/d' include/jemalloc/internal/jemalloc_internal_defs.h
! grep -q '^#define JEMALLOC_TLS ' include/jemalloc/internal/jemalloc_internal_defs.h
make -s -j"${JOBS:-2}" build_lib_static
cp lib/libjemalloc_pic.a "$dir/lib/libjemalloc_pic.a.tmp"
mv "$dir/lib/libjemalloc_pic.a.tmp" "$dir/lib/libjemalloc_pic.a"
if [ "$cache_root" != off ]; then   # best effort: a cache that cannot be written is no error
	{ mkdir -p "${cached%/*}" && cp lib/libjemalloc_pic.a "$cached.$$" && mv "$cached.$$" "$cached"; } 2>/dev/null || true
fi
