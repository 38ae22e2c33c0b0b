/* Variables in cache lines of their own.
 *
 * Every allocation and free reads a few words that change rarely: calm.h's
 * word, the stream-device and stack-walk generations, the step count, the
 * event log's switch, the configuration. A variable written often in the
 * same line makes each of those reads a miss on every other thread, and
 * which variables share a line is the linker's choice: under a static link
 * the archive's data sits beside the program's. bench_alloc's crew, kept
 * in a static array at first, shared ca_trace_recording's line under the
 * static archive's link-time optimization: two GPU-like threads read 1.05 to
 * 1.65 x one where they read 1.9 apart (docs/benchmarks.md, fifteenth
 * session). A CA_ALONE type is a whole line, aligned: nothing else can be
 * laid in it. The configuration, the core's state and the front cache's
 * registry, larger, are line-aligned where they are declared. */
#ifndef CUDALLOC_LINE_H
#define CUDALLOC_LINE_H

#include <stdbool.h>
#include <stdint.h>

#define CA_LINE 64   /* x86-64 and the usual arm64 cores */

/* A type T alone in its line: read and written as .v. */
#define CA_ALONE(T, name)                                                       \
  typedef union {                                                               \
    T v;                                                                        \
    char line_[CA_LINE];                                                        \
  } __attribute__((aligned(CA_LINE))) name;                                     \
  _Static_assert(sizeof(name) == CA_LINE && _Alignof(name) == CA_LINE, #name " is one line")

CA_ALONE(uint32_t, ca_alone_u32_t);
CA_ALONE(uint64_t, ca_alone_u64_t);
CA_ALONE(bool, ca_alone_bool_t);

#endif /* CUDALLOC_LINE_H */
