/* stderr lines without stdio: safe inside intercepted calls and at exit. */
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void ca_vlog(const char *fmt, va_list ap) {
  char buf[1024];
  int saved = errno;
  size_t n = (size_t)snprintf(buf, sizeof buf, "cudalloc: ");
  int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  if (m < 0) m = 0;
  n += (size_t)m < sizeof buf - n - 1 ? (size_t)m : sizeof buf - n - 2;
  buf[n++] = '\n';
  for (size_t off = 0; off < n;) {
    ssize_t w = write(2, buf + off, n - off);
    if (w <= 0 && errno != EINTR) break;
    if (w > 0) off += (size_t)w;
  }
  errno = saved;
}

void ca_log(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ca_vlog(fmt, ap);
  va_end(ap);
}
