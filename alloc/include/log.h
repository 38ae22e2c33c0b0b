/* Messages on stderr that never allocate and never re-enter the allocator:
 * formatted into a stack buffer and written with write(2). */
#ifndef CUDALLOC_LOG_H
#define CUDALLOC_LOG_H

#include <stdarg.h>

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

#endif /* CUDALLOC_LOG_H */
