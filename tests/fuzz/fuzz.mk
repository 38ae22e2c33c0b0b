# libFuzzer targets (clang): the configuration parser, operation sequences
# against a tiny simulated device with faults, and the trace readers
# (fuzz_import_*: PyTorch snapshots, RMM CSV, cudalloc's log; FUZZ_IMPORT_SECONDS each,
# at most 20 s by default). The library is
# rebuilt here with clang, the fuzzer's coverage, ASan+UBSan and the test
# build's assertions (CA_TESTING).
#
#   make fuzz                 each target for FUZZ_SECONDS (default 60) from
#                             the seed corpus in tests/fuzz/corpus/fuzz_<target>/
#   make fuzz FUZZ_SECONDS=5  a short run
#
# New inputs go to $(BUILD)/fuzz/corpus-<target>/, never into the repository
# by themselves (a long run's are merged into the seeds by hand: `-merge=1
# -use_counters=0`, the inputs that add an edge; docs/reliability.md);
# a crash leaves its input in $(BUILD)/fuzz/ (crash-*), to be replayed with
# `$(BUILD)/fuzz/fuzz_<target> <file>`.

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/%)
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=gnu11 -g -O1 $(WARN) -pthread -I$(CUDA_HOME)/include $(FUZZ_SAN) -DCA_TESTING \
  $(INC_CORE) -Ialloc/backend/sim -Ibench/replay -Ibench/trace
FUZZ_OBJS := $(ALLOC_SRCS:%.c=$(FUZZ_DIR)/obj/%.o)
# The trace readers (bench/replay/), for the fuzz_import_* targets.
FUZZ_IMPORT_OBJS := $(REPLAY_IMPORT_SRCS:%.c=$(FUZZ_DIR)/obj/%.o)
# The readers are small: a third of the slice (at most 20 s) finds what it will.
FUZZ_IMPORT_SECONDS ?= $(shell s=$(FUZZ_SECONDS); echo $$(( s > 20 ? 20 : s )))

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

FUZZ_IMPORT_BINS := $(filter $(FUZZ_DIR)/fuzz_import_%,$(FUZZ_BINS))
$(filter-out $(FUZZ_IMPORT_BINS),$(FUZZ_BINS)): $(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJS) $(JE_PRIVATE)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_OBJS) $(JE_PRIVATE) -o $@ -ldl -lm

$(FUZZ_IMPORT_BINS): $(FUZZ_DIR)/fuzz_import_%: tests/fuzz/fuzz_import_%.c tests/fuzz/fuzz_import.h $(FUZZ_IMPORT_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_IMPORT_OBJS) -o $@

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_DIR)/corpus-$$t; \
	  secs=$(FUZZ_SECONDS); case $$t in fuzz_import_*) secs=$(FUZZ_IMPORT_SECONDS);; esac; \
	  echo "== $$t: $$secs s from tests/fuzz/corpus/$$t"; \
	  (cd $(FUZZ_DIR) && ./$$t -max_total_time=$$secs -print_final_stats=1 \
	     corpus-$$t $(abspath tests/fuzz/corpus)/$$t > $$t.log 2>&1); rc=$$?; \
	  grep -E '^#[0-9]+ +DONE|^stat::number_of_executed_units|^stat::peak_rss_mb|ERROR|SUMMARY|^fuzz_' \
	    $(FUZZ_DIR)/$$t.log | head -20; \
	  if [ $$rc -ne 0 ]; then echo "FUZZ FAILED: $$t (log and crash input in $(FUZZ_DIR))"; exit 1; fi; \
	done; echo "fuzz: every target ran its slice ($(FUZZ_SECONDS) s, the readers $(FUZZ_IMPORT_SECONDS) s) without a failure"

-include $(FUZZ_OBJS:.o=.d) $(FUZZ_IMPORT_OBJS:.o=.d)
.SECONDARY: $(FUZZ_OBJS) $(FUZZ_IMPORT_OBJS)
