# cudalloc
#   make            libraries, header, pkg-config file, workload (and CUDA builds when nvcc exists)
#   make run        the main job: 50 training steps of the multimodal workload on the
#                   simulated device with libcudalloc.so preloaded, its memory report
#   make test       the Criterion suite, the preload tests and the workload checks
#   make test-asan  the same suite under AddressSanitizer + UBSan (build/asan)
#   make test-tsan  the same suite under ThreadSanitizer (build/tsan)
#   make bench      benchmarks that print figures (bench/)

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
CUDA_LIBDIR ?= $(CUDA_HOME)/lib64
BUILD ?= build
SAN ?=
CC ?= gcc

ifeq ($(SAN),asan)
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
  SAN_RUNTIME := $(shell $(CC) -print-file-name=libasan.so)
else ifeq ($(SAN),tsan)
  SANFLAGS := -fsanitize=thread
  SAN_RUNTIME := $(shell $(CC) -print-file-name=libtsan.so)
  TEST_EXTRA := tests/tsan_arena.c   # lets Criterion start under TSan (see the file)
endif

WARN := -Wall -Wextra -Werror
BASE_CFLAGS := -std=gnu11 -g -O2 $(WARN) -fPIC -pthread -I$(CUDA_HOME)/include -MMD -MP
# The library: hidden by default, so that it exports only what shim/exports.map lists.
LIB_CFLAGS := $(BASE_CFLAGS) -fvisibility=hidden -Ialloc -Ishim $(SANFLAGS)
# Programs that play "the application": never sanitized (the preloaded library is).
APP_CFLAGS := $(BASE_CFLAGS) -Ialloc
CUDART := -L$(CUDA_LIBDIR) -lcudart -Wl,-rpath,$(CUDA_LIBDIR)
LIBS := -ldl -lpthread -lm

ALLOC_SRCS := $(sort $(wildcard alloc/*.c))
SHIM_SRCS := $(sort $(wildcard shim/*.c))
ALLOC_OBJS := $(ALLOC_SRCS:%.c=$(BUILD)/obj/%.o)
SHIM_OBJS := $(SHIM_SRCS:%.c=$(BUILD)/obj/%.o)

LIB_SO := $(BUILD)/libcudalloc.so
LIB_A := $(BUILD)/libcudalloc.a
HEADER := $(BUILD)/include/cudalloc.h
PCFILE := $(BUILD)/cudalloc.pc

.PHONY: all lib run deps test test-asan test-tsan bench clean cuda
all: lib

lib: $(LIB_SO) $(LIB_A) $(HEADER) $(PCFILE)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -c $< -o $@

$(LIB_A): $(ALLOC_OBJS)
	@rm -f $@
	ar rcs $@ $^

ifeq ($(SAN),)
  NODEFS := -Wl,-z,defs
endif
$(LIB_SO): $(ALLOC_OBJS) $(SHIM_OBJS) shim/exports.map
	$(CC) -shared -o $@ $(ALLOC_OBJS) $(SHIM_OBJS) $(SANFLAGS) -Wl,-Bsymbolic \
	  -Wl,--version-script=shim/exports.map $(NODEFS) $(LIBS)

$(HEADER): alloc/cudalloc.h
	@mkdir -p $(@D)
	cp $< $@

$(PCFILE): Makefile
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(abspath $(BUILD))' 'libdir=$${prefix}' 'includedir=$${prefix}/include' '' \
	  'Name: cudalloc' 'Description: caching CUDA device-memory allocator' 'Version: 0.1.0' \
	  'Cflags: -I$${includedir} -I$(CUDA_HOME)/include' \
	  'Libs: -L$${libdir} -l:libcudalloc.a $(LIBS)' > $@

# Fragments owned by their directories: extra shim targets, the workload and kernels, the benchmarks.
include shim/shim.mk
include kernels/kernels.mk
include bench/bench.mk

# --- tests -------------------------------------------------------------------
TEST_SRCS := $(sort $(wildcard tests/test_*.c))
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
PROG_SRCS := $(sort $(wildcard tests/progs/*.c))
PROGS := $(PROG_SRCS:tests/progs/%.c=$(BUILD)/progs/%)

# Test binaries link the core statically (no interposition inside the test
# process); the preload tests run separate programs from tests/progs/.
$(BUILD)/tests/%: tests/%.c $(LIB_A) $(KERNEL_LIB) $(wildcard tests/*.h) $(TEST_EXTRA)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -Itests -Ikernels $< $(TEST_EXTRA) -o $@ $(LIB_A) $(KERNEL_LIB) $(SANFLAGS) -lcriterion $(LIBS)

$(BUILD)/progs/%: tests/progs/%.c $(wildcard tests/progs/*.h)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -Itests/progs $< -o $@ $(CUDART) $(LIBS)

# The test dependencies (Criterion, jemalloc): installed with apt-get when
# missing and allowed, else named.
deps:
	@tests/deps.sh

test: deps
	$(MAKE) lib $(TEST_BINS) $(PROGS) $(TEST_DEPS)
	BUILD=$(BUILD) SAN=$(SAN) SAN_RUNTIME=$(SAN_RUNTIME) tests/run.sh

REPORT := $(BUILD)/workload-report
run: lib $(WORKLOAD)
	CUDALLOC_CONF=backend:sim,report:$(REPORT) LD_PRELOAD=$(abspath $(LIB_SO)) \
	  $(WORKLOAD) --steps 50 --svg $(BUILD)/workload-memory.svg
	@echo "reports: $(REPORT)-leaks.txt (summary and leaks), $(REPORT)-stats.json (statistics)"

test-asan:
	$(MAKE) BUILD=build/asan SAN=asan test

test-tsan:
	$(MAKE) BUILD=build/tsan SAN=tsan test

clean:
	rm -rf build

-include $(ALLOC_OBJS:.o=.d) $(SHIM_OBJS:.o=.d)
