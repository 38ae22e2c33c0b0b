# cudalloc
#   make            libraries, header, pkg-config file, workload (and CUDA builds when nvcc exists)
#   make run        the main job: 50 training steps of the multimodal workload on the
#                   simulated device with libcudalloc.so preloaded, its memory report
#   make test       the Criterion suite, the preload tests and the workload checks
#   make test-asan  the same suite under AddressSanitizer + UBSan (build/asan)
#   make test-tsan  the same suite under ThreadSanitizer (build/tsan)
#   make bench      benchmarks that print figures (bench/)
#   make whatif     the shared PyTorch snapshots replayed with cudalloc-replay (docs/whatif.md)

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
CUDA_LIBDIR ?= $(CUDA_HOME)/lib64
BUILD ?= build
SAN ?=
# make's built-in CC is "cc"; gcc is the compiler the flags below are for
# (CC=clang make works too). A CC given on the command line or in the
# environment wins.
ifeq ($(origin CC),default)
  CC := gcc
endif
PREFIX ?= /usr/local
DESTDIR ?=
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin

VERSION := $(shell sed -n 's/^\#define CUDALLOC_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$$/\2/p' alloc/include/cudalloc.h | paste -sd.)
SOVERSION := $(firstword $(subst ., ,$(VERSION)))

ifeq ($(SAN),asan)
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
  SAN_RUNTIME := $(shell $(CC) -print-file-name=libasan.so)
else ifeq ($(SAN),tsan)
  SANFLAGS := -fsanitize=thread
  SAN_RUNTIME := $(shell $(CC) -print-file-name=libtsan.so)
  TEST_EXTRA := tests/tsan_arena.c   # lets Criterion start under TSan (see the file)
endif
# Internal assertions (ca_assert) hold in the sanitizer builds too.
ifneq ($(SAN),)
  SANFLAGS += -DCA_ASSERTS
endif

WARN := -Wall -Wextra -Werror
BASE_CFLAGS := -std=gnu11 -g -O2 $(WARN) -fPIC -pthread -I$(CUDA_HOME)/include -MMD -MP
# Thread-locals through TLS descriptors: in libcudalloc.so a thread-local
# read is a few instructions instead of a __tls_get_addr call, preloaded
# and, since the library's TLS fits in the static TLS glibc spares a late
# dlopen (132 bytes; alloc/include/thread_heap.h), dlopen'd by PyTorch's
# pluggable allocator too. (initial-exec would make a dlopen fail once
# other libraries took that spare.) Not in sanitized builds, whose runtimes
# track thread-locals through __tls_get_addr.
TLS_DIALECT := $(if $(SAN),,$(if $(filter x86_64,$(shell uname -m)),-mtls-dialect=gnu2))
# The library: hidden by default, so that it exports only what shim/exports.map lists.
LIB_CFLAGS := $(BASE_CFLAGS) -fvisibility=hidden $(TLS_DIALECT) $(SANFLAGS)
# Link-time optimization of the core in the shipped library and the
# benchmarks that link it: a cached pair crosses a dozen small files (alloc,
# pool, bins, blocks, fence, ptrmap, peak...), whose calls LTO inlines
# (docs/benchmarks.md, "The core's pair, fifth session"). The core's objects
# only (build/obj/alloc/*.o): the backends are called through the contract's
# function pointers anyway, the shim's symbol versions are top-level asm that
# LTO cannot see (shim/dlsym.c), and the test binaries link the backend and
# simulator objects, which stay plain so that their links stay fast. Fat
# objects, so that a link without -flto still works; not in sanitized
# builds, nor in the test build of the core (obj-test).
LTO := $(if $(SAN),,-flto=auto -ffat-lto-objects)
LTO_LINK := $(if $(LTO),$(LTO) -O2)
SHIPPED_CFLAGS := $(LIB_CFLAGS) $(LTO)
# Each layer sees the layers below it through their headers only:
#   alloc/include   the core's interface (public header, core.h, log.h)
#   alloc/backend   the backend contract
#   curves          per-step series: trends and SVG (shared with the workload)
INC_CORE := -Ialloc -Ialloc/include -Ialloc/backend -Icurves
INC_BACKEND := -Ialloc/backend -Ialloc/include
INC_SIM := -Ialloc/backend/sim $(INC_BACKEND)
INC_SHIM := -Ishim -Ialloc/include -Ialloc/backend
INC_SHIM_SIM := -Ishim/sim $(INC_SHIM) -Ialloc/backend/sim
# Programs that play "the application": never sanitized (the preloaded
# library is), and built against the public header alone.
APP_CFLAGS := $(BASE_CFLAGS) -I$(BUILD)/include
CUDART := -L$(CUDA_LIBDIR) -lcudart -Wl,-rpath,$(CUDA_LIBDIR)
LIBS := -ldl -lpthread -lm

CORE_SRCS := $(sort $(wildcard alloc/*.c))
BACKEND_SRCS := $(sort $(wildcard alloc/backend/*.c))
SIM_SRCS := $(sort $(wildcard alloc/backend/sim/*.c))
SHIM_SRCS := $(sort $(wildcard shim/*.c))
SHIM_SIM_SRCS := $(sort $(wildcard shim/sim/*.c))
CURVE_SRCS := $(sort $(wildcard curves/*.c))
ALLOC_SRCS := $(CORE_SRCS) $(BACKEND_SRCS) $(SIM_SRCS) $(CURVE_SRCS)
ALLOC_OBJS := $(ALLOC_SRCS:%.c=$(BUILD)/obj/%.o)
SHIM_OBJS := $(SHIM_SRCS:%.c=$(BUILD)/obj/%.o) $(SHIM_SIM_SRCS:%.c=$(BUILD)/obj/%.o)
# The test build of the core: the same sources with CA_TESTING, which adds
# the switches that break a guard (so that its test can show it is caught)
# and the internal assertions. Only test binaries link it.
TEST_CORE_OBJS := $(CORE_SRCS:%.c=$(BUILD)/obj-test/%.o)
TEST_ALLOC_OBJS := $(TEST_CORE_OBJS) $(BACKEND_SRCS:%.c=$(BUILD)/obj/%.o) $(SIM_SRCS:%.c=$(BUILD)/obj/%.o) \
  $(CURVE_SRCS:%.c=$(BUILD)/obj/%.o)

LIB_SO_NAME := libcudalloc.so.$(SOVERSION)
LIB_SO := $(BUILD)/libcudalloc.so
LIB_SO_REAL := $(BUILD)/libcudalloc.so.$(VERSION)
LIB_A := $(BUILD)/libcudalloc.a
LIB_TEST_A := $(BUILD)/libcudalloc-test.a
HEADER := $(BUILD)/include/cudalloc.h
PCFILE := $(BUILD)/cudalloc.pc
PCFILE_UNINSTALLED := $(BUILD)/cudalloc-uninstalled.pc
PC_PRIVATE := -L$(CUDA_LIBDIR) $(LIBS)

.PHONY: all lib run deps test test-asan test-tsan bench clean cuda install uninstall
all: lib

lib: $(LIB_SO) $(BUILD)/$(LIB_SO_NAME) $(LIB_A) $(HEADER) $(PCFILE) $(PCFILE_UNINSTALLED)

$(BUILD)/obj/alloc/%.o: alloc/%.c
	@mkdir -p $(@D)
	$(CC) $(SHIPPED_CFLAGS) $(INC_CORE) -c $< -o $@
$(BUILD)/obj/alloc/backend/%.o: alloc/backend/%.c
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(INC_BACKEND) -c $< -o $@
$(BUILD)/obj/alloc/backend/sim/%.o: alloc/backend/sim/%.c
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(INC_SIM) -c $< -o $@
$(BUILD)/obj/curves/%.o: curves/%.c
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -Icurves -c $< -o $@
$(BUILD)/obj/shim/%.o: shim/%.c
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(INC_SHIM) -c $< -o $@
$(BUILD)/obj/shim/sim/%.o: shim/sim/%.c
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(INC_SHIM_SIM) -c $< -o $@
$(BUILD)/obj-test/alloc/%.o: alloc/%.c
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) $(INC_CORE) -DCA_TESTING -c $< -o $@

include alloc/jemalloc.mk

$(LIB_A): $(ALLOC_OBJS) $(JE_OBJS_STAMP)
	@rm -f $@
	ar rcs $@ $(ALLOC_OBJS) $(JE_OBJS)

$(LIB_TEST_A): $(TEST_ALLOC_OBJS) $(JE_OBJS_STAMP)
	@rm -f $@
	ar rcs $@ $(TEST_ALLOC_OBJS) $(JE_OBJS)

ifeq ($(SAN),)
  NODEFS := -Wl,-z,defs
endif
# -z nodelete: a dlclose leaves the library loaded. Its threads' per-thread
# blocks are freed by pthread key destructors in the library at each
# thread's exit, and its exit report runs from an atexit handler: an
# unloaded library crashed the first thread to exit after the close
# (tests/progs/dlopen_lib's dlclose case). A preloaded library is never
# unloaded anyway, and PyTorch never closes its allocator's.
$(LIB_SO_REAL): $(ALLOC_OBJS) $(SHIM_OBJS) shim/exports.map $(JE_PRIVATE)
	$(CC) -shared $(LTO_LINK) -o $@ $(ALLOC_OBJS) $(SHIM_OBJS) $(JE_LINK) $(SANFLAGS) -Wl,-soname,$(LIB_SO_NAME) -Wl,-Bsymbolic -Wl,-z,nodelete \
	  -Wl,--version-script=shim/exports.map $(NODEFS) $(LIBS)
$(LIB_SO) $(BUILD)/$(LIB_SO_NAME): $(LIB_SO_REAL)
	ln -sf $(notdir $<) $@

$(HEADER): alloc/include/cudalloc.h
	@mkdir -p $(@D)
	cp $< $@

# pkg-config: the installed file names the install prefix; the uninstalled
# one the build tree (PKG_CONFIG_PATH=build, `pkg-config cudalloc-uninstalled`).
define pc_file
	printf '%s\n' 'prefix=$(1)' 'libdir=$(2)' 'includedir=$(3)' '' \
	  'Name: cudalloc' 'Description: caching CUDA device-memory allocator' 'Version: $(VERSION)' \
	  'Cflags: -I$${includedir} -I$(CUDA_HOME)/include' \
	  'Libs: -L$${libdir} -lcudalloc' 'Libs.private: $(PC_PRIVATE)' > $@
endef
# A directory under the prefix is written relative to ${prefix}, so that
# `pkg-config --define-prefix` can move it (a DESTDIR tree, a relocated install).
under_prefix = $(if $(filter $(PREFIX)/%,$(1)),$${prefix}/$(patsubst $(PREFIX)/%,%,$(1)),$(1))
# The install directories the installed .pc names, remembered so that
# `make install PREFIX=...` after a plain `make` rewrites it.
INSTALL_DIRS := $(BUILD)/install-dirs
$(INSTALL_DIRS): FORCE
	@mkdir -p $(@D)
	@echo '$(PREFIX) $(LIBDIR) $(INCLUDEDIR)' | cmp -s - $@ || echo '$(PREFIX) $(LIBDIR) $(INCLUDEDIR)' > $@
FORCE:
$(PCFILE): Makefile alloc/include/cudalloc.h $(INSTALL_DIRS)
	@mkdir -p $(@D)
	$(call pc_file,$(PREFIX),$(call under_prefix,$(LIBDIR)),$(call under_prefix,$(INCLUDEDIR)))
$(PCFILE_UNINSTALLED): Makefile alloc/include/cudalloc.h
	@mkdir -p $(@D)
	$(call pc_file,$(abspath $(BUILD)),$${prefix},$${prefix}/include)

install: lib
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(BINDIR)
	install -m 755 $(REPLAY) $(DESTDIR)$(BINDIR)/
	install -m 755 $(LIB_SO_REAL) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(LIB_SO_REAL)) $(DESTDIR)$(LIBDIR)/$(LIB_SO_NAME)
	ln -sf $(LIB_SO_NAME) $(DESTDIR)$(LIBDIR)/libcudalloc.so
	# the archive installed without its LTO bytecode: a program built by another
	# GCC with -flto would refuse this one's (the plain code beside it is what links)
	objcopy --remove-section='.gnu.lto_*' $(LIB_A) $(DESTDIR)$(LIBDIR)/libcudalloc.a
	chmod 644 $(DESTDIR)$(LIBDIR)/libcudalloc.a
	install -m 644 alloc/include/cudalloc.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 $(PCFILE) $(DESTDIR)$(LIBDIR)/pkgconfig/

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(notdir $(LIB_SO_REAL)) $(DESTDIR)$(LIBDIR)/$(LIB_SO_NAME) \
	  $(DESTDIR)$(LIBDIR)/libcudalloc.so $(DESTDIR)$(LIBDIR)/libcudalloc.a \
	  $(DESTDIR)$(INCLUDEDIR)/cudalloc.h $(DESTDIR)$(LIBDIR)/pkgconfig/cudalloc.pc $(DESTDIR)$(BINDIR)/cudalloc-replay

# Fragments owned by their directories: extra shim targets, the workload and kernels, the benchmarks.
include shim/shim.mk
include kernels/kernels.mk
include bench/bench.mk
include bench/trace/trace.mk
include bench/gpu/gpu.mk
include bench/replay/replay.mk
include tests/fuzz/fuzz.mk

# --- tests -------------------------------------------------------------------
TEST_SRCS := $(sort $(wildcard tests/test_*.c))
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
PROG_SRCS := $(sort $(wildcard tests/progs/*.c))
PROGS := $(PROG_SRCS:tests/progs/%.c=$(BUILD)/progs/%)

# Test binaries link the test build of the core statically (no interposition
# inside the test process); the preload tests run separate programs from
# tests/progs/.
TEST_INC := -Itests -Ikernels $(INC_CORE) -Ialloc/backend/sim -Ishim -Ibench/replay
$(BUILD)/tests/%: tests/%.c $(LIB_TEST_A) $(KERNEL_LIB) $(wildcard tests/*.h) $(TEST_EXTRA)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -DCA_TESTING $(TEST_INC) $< $(TEST_EXTRA) -o $@ $(TEST_LIBS) $(LIB_TEST_A) $(KERNEL_LIB) $(SANFLAGS) -lcriterion $(LIBS)
# Runs a Criterion binary whose .fini check fails on purpose.
$(BUILD)/tests/test_fini_assert: $(BUILD)/tests/fini_probe
# The event log's suite reads logs with the tools' reader, and runs the tool.
$(BUILD)/tests/test_trace: $(TRACE_TOOLS_LIB) $(TRACE_TOOL)
$(BUILD)/tests/test_trace: TEST_INC += -Ibench/trace
$(BUILD)/tests/test_trace: TEST_LIBS = $(TRACE_TOOLS_LIB)
$(BUILD)/tests/test_trace_clock: $(TRACE_TOOLS_LIB)
$(BUILD)/tests/test_trace_clock: TEST_INC += -Ibench/trace
$(BUILD)/tests/test_trace_clock: TEST_LIBS = $(TRACE_TOOLS_LIB)
$(BUILD)/tests/test_trace_roundtrip: TEST_LIBS = $(REPLAY_A) $(TRACE_TOOLS_LIB)
$(BUILD)/tests/test_trace_roundtrip: $(REPLAY_A) $(TRACE_TOOL)

$(BUILD)/progs/%: tests/progs/%.c $(wildcard tests/progs/*.h) $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -Itests/progs $< -o $@ $(PROG_LIBS) $(CUDART) $(LIBS)

# Named call sites without debug information: dladdr sees its functions.
$(BUILD)/progs/creep_leak: PROG_LIBS = -rdynamic

# The one program linked with libcudalloc.a instead of run under the preload
# (tests/test_static.c); a sanitized archive needs its sanitizer's runtime.
$(BUILD)/progs/static_app: $(LIB_A)
$(BUILD)/progs/static_app: PROG_LIBS = $(LIB_A) $(SANFLAGS)

# The fault campaign (tests/campaign/): the whole op x outcome table.
CAMPAIGN := $(BUILD)/tests/campaign/campaign
$(CAMPAIGN): tests/campaign/campaign_main.c tests/campaign/campaign.h $(LIB_TEST_A)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -DCA_TESTING $(TEST_INC) -Itests/campaign $< -o $@ $(LIB_TEST_A) $(SANFLAGS) $(LIBS)
$(BUILD)/tests/test_campaign: TEST_INC += -Itests/campaign

.PHONY: campaign
campaign: $(CAMPAIGN)
	$(CAMPAIGN) $(CAMPAIGN_ARGS)

# The build and test dependencies (tests/deps.sh: libdw's header, Criterion,
# jemalloc, mimalloc, pkg-config, python3): installed with apt-get when
# missing and allowed, else named. make run and make test start with them.
deps:
	@tests/deps.sh

test: deps
	$(MAKE) lib $(TEST_BINS) $(PROGS) $(TEST_DEPS)
	BUILD=$(BUILD) SAN=$(SAN) SAN_RUNTIME=$(SAN_RUNTIME) tests/run.sh

REPORT := $(BUILD)/workload-report
run: deps
	$(MAKE) lib $(WORKLOAD)
	CUDALLOC_CONF=backend:sim,report:$(REPORT) LD_PRELOAD=$(abspath $(LIB_SO)) \
	  $(WORKLOAD) --steps 50 --svg $(BUILD)/workload-memory.svg
	@echo "reports: $(REPORT)-leaks.txt (summary and leaks), $(REPORT)-stats.json (statistics)"

test-asan:
	$(MAKE) BUILD=build/asan SAN=asan test

test-tsan:
	$(MAKE) BUILD=build/tsan SAN=tsan test

clean:
	rm -rf build

-include $(ALLOC_OBJS:.o=.d) $(SHIM_OBJS:.o=.d) $(TEST_CORE_OBJS:.o=.d) $(wildcard $(BUILD)/tests/*.d $(BUILD)/progs/*.d)
