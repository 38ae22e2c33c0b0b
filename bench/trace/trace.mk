# The event log's tools (docs/trace.md):
#   $(BUILD)/cudalloc-trace        exports a log to PyTorch's memory_viz pickle,
#                                  Perfetto JSON, RMM CSV, or a summary
#   $(TRACE_TOOLS_LIB)             the log reader and the pickle writer, for the
#                                  tests and the replay (bench/trace/trace_read.h,
#                                  bench/trace/pickle_write.h)
TRACE_TOOL := $(BUILD)/cudalloc-trace
TRACE_TOOLS_LIB := $(BUILD)/libcatrace-tools.a
TRACE_LIB_SRCS := bench/trace/trace_read.c bench/trace/pickle_write.c bench/trace/model.c \
  bench/trace/export_pytorch.c bench/trace/export_perfetto.c bench/trace/site_tracks.c bench/trace/export_rmm.c bench/trace/export_summary.c
TRACE_LIB_OBJS := $(TRACE_LIB_SRCS:%.c=$(BUILD)/obj/%.o)
TRACE_CFLAGS := $(BASE_CFLAGS) $(SANFLAGS) -Ibench/trace -Ialloc/include

$(BUILD)/obj/bench/trace/%.o: bench/trace/%.c
	@mkdir -p $(@D)
	$(CC) $(TRACE_CFLAGS) -c $< -o $@

$(TRACE_TOOLS_LIB): $(TRACE_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(TRACE_TOOL): bench/trace/cudalloc_trace.c $(TRACE_TOOLS_LIB)
	@mkdir -p $(@D)
	$(CC) $(TRACE_CFLAGS) $< -o $@ $(TRACE_TOOLS_LIB) $(SANFLAGS)

all lib: $(TRACE_TOOL)
-include $(TRACE_LIB_OBJS:.o=.d)
