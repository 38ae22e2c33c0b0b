# cudalloc-replay (bench/replay/): imports allocation traces (PyTorch memory
# snapshots, RMM CSV logs) and replays them through cudalloc's core on the
# simulated device, which touches no memory.
#
#   $(BUILD)/cudalloc-replay TRACE...   docs/whatif.md; installed by `make install`
#   make whatif                          the what-if table of the shared snapshots
#                                        (TRACES=dir: another folder of them)
#
# The import and replay code is an archive of its own, linked by the tool
# (with libcudalloc.a) and by the tests (with the test build of the core).

REPLAY := $(BUILD)/cudalloc-replay
# cudalloc's own log is read by the recorder's reader (bench/trace/trace_read.c).
REPLAY_SRCS := $(filter-out bench/replay/main.c,$(sort $(wildcard bench/replay/*.c))) bench/trace/trace_read.c
REPLAY_IMPORT_SRCS := $(filter-out bench/replay/replay.c,$(REPLAY_SRCS))
REPLAY_OBJS := $(REPLAY_SRCS:%.c=$(BUILD)/obj/%.o)
REPLAY_A := $(BUILD)/libcudalloc-replay.a
REPLAY_INC := -Ibench/replay -Ibench/trace -Ialloc/include -Ialloc/backend -Ialloc/backend/sim
TRACES ?= $(firstword $(wildcard ../shared/traces ../../shared/traces))

$(BUILD)/obj/bench/replay/%.o: bench/replay/%.c
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(SANFLAGS) $(REPLAY_INC) -c $< -o $@

$(REPLAY_A): $(REPLAY_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(REPLAY): $(BUILD)/obj/bench/replay/main.o $(REPLAY_A) $(LIB_A)
	$(CC) $(BASE_CFLAGS) $(SANFLAGS) $< -o $@ $(REPLAY_A) $(LIB_A) $(LIBS)

lib: $(REPLAY)

# The tests of the importers and the replay link the archive; they read the
# shared snapshots from $(TRACES).
$(BUILD)/tests/test_replay_import $(BUILD)/tests/test_replay $(BUILD)/tests/test_replay_economy: $(REPLAY_A)
$(BUILD)/tests/test_replay_import $(BUILD)/tests/test_replay $(BUILD)/tests/test_replay_economy: TEST_LIBS = $(REPLAY_A)

.PHONY: whatif economy
whatif: $(REPLAY)
	@test -n "$(TRACES)" || { echo "whatif: no traces folder (TRACES=dir)"; exit 1; }
	$(REPLAY) --table $(sort $(wildcard $(TRACES)/*.pickle))

-include $(REPLAY_OBJS:.o=.d) $(BUILD)/obj/bench/replay/main.d

# The driver calls of expandable segments on the same traces (docs/benchmarks.md).
economy: $(REPLAY)
	@test -n "$(TRACES)" || { echo "economy: no traces folder (TRACES=dir)"; exit 1; }
	$(REPLAY) --economy $(sort $(wildcard $(TRACES)/*.pickle))
