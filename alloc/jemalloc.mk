# The private jemalloc of the pinned host-memory cache (alloc/pinned*.c).
#
# Debian's libjemalloc-dev ships a PIC archive of jemalloc. cudalloc links a
# copy in which every symbol the archive defines is renamed ca_je_<name>
# (malloc, free, mallocx, mallctl, je_*: all of them), without the C++
# operators (jemalloc_cpp), so that the copy serves cudalloc alone: the
# program's malloc stays glibc's (or its own), and a program that links
# jemalloc itself gets its own jemalloc. In libcudalloc.so the renamed
# symbols are also hidden (--exclude-libs, and ca_* is local in
# shim/exports.map); libcudalloc.a carries the renamed objects.
JEMALLOC_PIC ?= $(shell $(CC) -print-file-name=libjemalloc_pic.a)
JE_DIR := $(BUILD)/jemalloc
JE_PRIVATE := $(JE_DIR)/libjemalloc-private.a
JE_OBJS_STAMP := $(JE_DIR)/obj/.stamp
JE_LINK := $(JE_PRIVATE) -Wl,--exclude-libs,$(notdir $(JE_PRIVATE))

$(JE_PRIVATE): alloc/jemalloc.mk
	@test -f "$(JEMALLOC_PIC)" || { echo "libjemalloc_pic.a not found: apt-get install libjemalloc-dev" >&2; exit 1; }
	@mkdir -p $(@D)
	cp "$(JEMALLOC_PIC)" $@.tmp
	ar d $@.tmp jemalloc_cpp.pic.o
	nm -g --defined-only $@.tmp | awk 'NF == 3 { print $$3 " ca_je_" $$3 }' | sort -u > $(JE_DIR)/rename.map
	objcopy --redefine-syms=$(JE_DIR)/rename.map $@.tmp $@
	rm -f $@.tmp

# The same objects, loose, for the static libraries.
$(JE_OBJS_STAMP): $(JE_PRIVATE)
	@rm -rf $(@D) && mkdir -p $(@D)
	cd $(@D) && ar x $(abspath $<)
	touch $@
JE_OBJS = $(wildcard $(JE_DIR)/obj/*.o)
