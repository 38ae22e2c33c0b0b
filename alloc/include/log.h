/* Messages on stderr that never allocate and never re-enter the allocator:
 * formatted into a stack buffer and written with write(2).
 *
 * A process that is one of several of a job (rank.h) says so on every
 * line: "cudalloc[rank 3]: ..." instead of "cudalloc: ...", so that the
 * lines of ranks sharing one terminal or log can be told apart. */
#ifndef CUDALLOC_LOG_H
#define CUDALLOC_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* One line "cudalloc: <message>\n" on stderr. */
void ca_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ca_vlog(const char *fmt, va_list ap);

/* ca_log the first time only, per call site. */
#define ca_log_once(...)                                            \
  do {                                                              \
    static int ca_logged_;                                          \
    if (!__atomic_exchange_n(&ca_logged_, 1, __ATOMIC_RELAXED))     \
      ca_log(__VA_ARGS__);                                          \
  } while (0)

/* Many lines (a summary, a table) written on stderr with ONE write(2), so
 * that the processes of a job sharing a terminal or a pipe do not
 * interleave their lines (a pipe keeps a write whole up to PIPE_BUF, 4096
 * bytes on Linux; a terminal keeps any write whole). Built in memory
 * (open_memstream; these are written outside the hot path, so they may
 * allocate):
 *   ca_log_block_t b;
 *   FILE *f = ca_log_block_begin(&b);
 *   fprintf(f, "cudalloc: ...\n");
 *   ca_log_block_end(&b);
 * Lines that start with "cudalloc:" get the rank tag there, others are
 * prefixed with "cudalloc[rank 3]: " (nothing when the process is alone).
 * Out of host memory, f is stderr itself and the lines go out unprefixed. */
typedef struct ca_log_block_s {
  FILE *f;
  char *buf;
  size_t n;
} ca_log_block_t;
FILE *ca_log_block_begin(ca_log_block_t *b);
void ca_log_block_end(ca_log_block_t *b);

/* The lines of text[0..n) as ca_log_block_end writes them: prefixed when
 * the process is one of several, in one write(2). */
void ca_log_text(const char *text, size_t n);

#endif /* CUDALLOC_LOG_H */
