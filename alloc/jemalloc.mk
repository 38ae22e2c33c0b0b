# The private jemalloc of the pinned host-memory cache (alloc/pinned*.c).
#
# Built from Debian's source package (alloc/jemalloc/fetch-build.sh), not
# taken from Debian's binary archive: that one keeps its thread state in
# initial-exec TLS, and dlopen() of libcudalloc.so (ctypes, PyTorch's
# pluggable allocator) then fails for want of static TLS. Built without
# thread-locals at all (its thread state on the heap, fetch-build.sh says
# how), so that the library's TLS stays small enough to be static under
# dlopen too (alloc/include/thread_heap.h). Configured with the prefix and
# private namespace ca_je_:
# every symbol it defines is ca_je_<name>, so the copy serves cudalloc
# alone: the program's malloc stays glibc's (or its own), and a program
# that links jemalloc itself gets its own jemalloc. In libcudalloc.so the
# ca_je_ symbols are also hidden (--exclude-libs, and ca_* is local in
# shim/exports.map); libcudalloc.a carries the objects.
#
# One build for every BUILD dir (build/asan, build/tsan...): jemalloc is
# never instrumented, and building it takes minutes on two cores.
JE_BUILT := build/jemalloc/lib/libjemalloc_pic.a
JE_DIR := $(BUILD)/jemalloc-private
JE_PRIVATE := $(JE_DIR)/libjemalloc-private.a
JE_OBJS_STAMP := $(JE_DIR)/obj/.stamp
JE_LINK := $(JE_PRIVATE) -Wl,--exclude-libs,$(notdir $(JE_PRIVATE))

$(JE_BUILT): alloc/jemalloc/fetch-build.sh
	alloc/jemalloc/fetch-build.sh build/jemalloc

# A symbol without the prefix would stand in for the program's own (malloc):
# the copy is refused.
$(JE_PRIVATE): $(JE_BUILT) alloc/jemalloc.mk
	@mkdir -p $(@D)
	@bad=$$(nm -g --defined-only $< | awk 'NF == 3 && $$3 !~ /^ca_je_/ { print $$3 }' | sort -u); \
	  test -z "$$bad" || { echo "jemalloc defines unprefixed symbols: $$bad" >&2; exit 1; }
	cp $< $@

# The same objects, loose, for the static libraries.
$(JE_OBJS_STAMP): $(JE_PRIVATE)
	@rm -rf $(@D) && mkdir -p $(@D)
	cd $(@D) && ar x $(abspath $<)
	touch $@
JE_OBJS = $(wildcard $(JE_DIR)/obj/*.o)
