# Benchmarks: they print figures; nothing here is a pass/fail test.
#
#   make bench                    builds and runs bench/run.sh: bench_alloc (cudalloc's
#                                 cached alloc+free pair vs jemalloc and mimalloc) and
#                                 bench/bench_workload.sh (the 50-step workload), then a
#                                 compact table; the whole output is kept in
#                                 $(BUILD)/bench/bench.log. A few minutes on 2 cores.
#   make bench BENCH_SHORT=1      the same, short (CI: under a minute), noisy figures
#   $(BUILD)/bench/bench_alloc    the pair benchmark (links libcudalloc.a and jemalloc)
#   $(BUILD)/bench/bench_pinned   pinned host memory: the cache vs uncached pinning vs jemalloc
#   $(BUILD)/bench/libstepspy.so  counts backend calls per workload step (preloaded)
#   $(BUILD)/bench/bench_trace    the event log's cost per event, recording on vs off
#                                 (docs/trace.md; about 5 s, not part of make bench)
#   make bench-pack               copies jemalloc's header and static library into
#                                 build/gpu-pack/jemalloc, and mimalloc's header and
#                                 shared library beside Criterion's (build/gpu-pack/include,
#                                 lib), for a GPU machine without them (after
#                                 `bash bench/gpu-check.sh --pack`)
#
# docs/benchmarks.md says what each figure measures.

BENCH_ALLOC := $(BUILD)/bench/bench_alloc
BENCH_SPY := $(BUILD)/bench/libstepspy.so
BENCH_TRACE := $(BUILD)/bench/bench_trace
# The unprefixed jemalloc API (mallocx/dallocx): Debian's libjemalloc-dev, or a
# packed copy (JEMALLOC_CFLAGS=-I<dir>/include JEMALLOC_LIBS=<dir>/libjemalloc.a).
JEMALLOC_CFLAGS ?=
JEMALLOC_LIBS ?= -ljemalloc
JEMALLOC_PACK := build/gpu-pack/jemalloc
# mimalloc (Debian's libmimalloc-dev), called by name (mi_malloc/mi_free): it replaces no malloc.
MIMALLOC_LIBS ?= -lmimalloc

# It reads the simulated device's call counters, so it sees the backend's headers.
$(BENCH_ALLOC): bench/bench_alloc.c bench/bench.h $(LIB_A) $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $(SANFLAGS) $(JEMALLOC_CFLAGS) -Ibench -Ialloc/backend -Ialloc/backend/sim $< -o $@ $(LTO_LINK) $(LIB_A) $(JEMALLOC_LIBS) $(MIMALLOC_LIBS) $(CUDART) $(LIBS)

# Pinned host memory: cudalloc's cache vs uncached pinning vs jemalloc.
BENCH_PINNED := $(BUILD)/bench/bench_pinned
$(BENCH_PINNED): bench/bench_pinned.c bench/bench.h $(LIB_A) $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $(SANFLAGS) $(JEMALLOC_CFLAGS) -Ibench $< -o $@ $(LTO_LINK) $(LIB_A) $(JEMALLOC_LIBS) $(CUDART) $(LIBS)

# The event log's recording cost (docs/trace.md); run alone: taskset -c 0 $(BENCH_TRACE).
$(BENCH_TRACE): bench/bench_trace.c bench/bench.h $(LIB_A) $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $(SANFLAGS) -Ibench $< -o $@ $(LTO_LINK) $(LIB_A) $(CUDART) $(LIBS)

# Instruction counts of the pair under callgrind (docs/benchmarks.md); not run by make bench.
BENCH_PAIR_IR := $(BUILD)/bench/pair_instructions
$(BENCH_PAIR_IR): bench/pair_instructions.c bench/bench.h $(LIB_A) $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -Ibench -Ialloc/backend -Ialloc/backend/sim $< -o $@ $(LTO_LINK) $(LIB_A) $(CUDART) $(LIBS)

# jemalloc's pair on the same sequences, for its instruction counts beside cudalloc's; not run by make bench.
BENCH_JE_PAIR_IR := $(BUILD)/bench/je_pair_instructions
$(BENCH_JE_PAIR_IR): bench/je_pair_instructions.c bench/bench.h
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) $(JEMALLOC_CFLAGS) -Ibench $< -o $@ $(JEMALLOC_LIBS) $(LIBS)

# PyTorch's pluggable-allocator entry points through dlopen, as PyTorch calls them; built, not
# run, by make bench.
BENCH_TORCH_PAIR := $(BUILD)/bench/torch_pair
$(BENCH_TORCH_PAIR): bench/torch_pair.c bench/bench.h
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -Ibench $< -o $@ $(LIBS)

# The same tiny pair through the runtime's calls, run under LD_PRELOAD (the shim's path); built,
# not run, by make bench.
BENCH_PRELOAD_PAIR := $(BUILD)/bench/preload_pair
$(BENCH_PRELOAD_PAIR): bench/preload_pair.c bench/bench.h
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -Ibench $< -o $@ $(CUDART) $(LIBS)

$(BENCH_SPY): bench/step_spy.c $(HEADER)
	@mkdir -p $(@D)
	$(CC) $(APP_CFLAGS) -fvisibility=hidden -shared $< -o $@ -ldl

BENCH_SHORT ?= 0
bench: lib $(BENCH_ALLOC) $(BENCH_PINNED) $(BENCH_SPY) $(BENCH_PAIR_IR) $(BENCH_JE_PAIR_IR) $(BENCH_PRELOAD_PAIR) $(BENCH_TORCH_PAIR) $(WORKLOAD) $(WORKLOAD_HOST) $(BUILD)/cudalloc-replay
	BUILD=$(BUILD) BENCH_SHORT=$(BENCH_SHORT) TRACES=$(TRACES) bench/run.sh

.PHONY: bench-pack
bench-pack:
	@lib=$$($(CC) -print-file-name=libjemalloc.a); test -f "$$lib" || { echo "no libjemalloc.a here"; exit 1; }; \
	  mkdir -p $(JEMALLOC_PACK)/include && cp -r /usr/include/jemalloc $(JEMALLOC_PACK)/include/ && \
	  cp "$$lib" $(JEMALLOC_PACK)/ && echo "jemalloc packed into $(JEMALLOC_PACK)"
	@so=$$($(CC) -print-file-name=libmimalloc.so); test -f "$$so" || { echo "no libmimalloc.so here"; exit 1; }; \
	  mkdir -p build/gpu-pack/include build/gpu-pack/lib && cp /usr/include/mimalloc.h build/gpu-pack/include/ && \
	  cp -L "$$so" build/gpu-pack/lib/libmimalloc.so && cp -L "$$so" build/gpu-pack/lib/libmimalloc.so.2 && \
	  echo "mimalloc packed into build/gpu-pack/include and lib (found as Criterion's are)"
