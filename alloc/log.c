/* stderr lines without stdio: safe inside intercepted calls and at exit. */
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rank.h"

#define CA_TAG_MAX 48

/* Writes all of buf, resuming after a signal; a write that fails for
 * another reason loses the rest (stderr is closed: nobody to tell). */
static void write_all(const char *buf, size_t n) {
  for (size_t off = 0; off < n;) {
    ssize_t w = write(2, buf + off, n - off);
    if (w <= 0 && errno != EINTR) break;
    if (w > 0) off += (size_t)w;
  }
}

/* "cudalloc: " or "cudalloc[rank 3]: " into buf; returns its length. */
static size_t prefix(char *buf, size_t cap) {
  char tag[CA_TAG_MAX];
  ca_rank_tag(tag, sizeof tag);
  int n = tag[0] ? snprintf(buf, cap, "cudalloc[%s]: ", tag) : snprintf(buf, cap, "cudalloc: ");
  return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

void ca_vlog(const char *fmt, va_list ap) {
  char buf[1024];
  int saved = errno;
  size_t n = prefix(buf, sizeof buf);
  int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  if (m < 0) m = 0;
  n += (size_t)m < sizeof buf - n - 1 ? (size_t)m : sizeof buf - n - 2;
  buf[n++] = '\n';
  write_all(buf, n);
  errno = saved;
}

void ca_log(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ca_vlog(fmt, ap);
  va_end(ap);
}

static const char plain[] = "cudalloc: ";
#define PLAIN_LEN (sizeof plain - 1)

void ca_log_text(const char *text, size_t n) {
  char tag[CA_TAG_MAX + 16];
  size_t t = prefix(tag, sizeof tag);
  if (t == PLAIN_LEN) {   /* alone: the text as it is */
    write_all(text, n);
    return;
  }
  size_t lines = 1;
  for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
  char *out = malloc(n + lines * t + 1);
  if (!out) {   /* no memory for the tags: the lines are still worth having */
    write_all(text, n);
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    const char *nl = memchr(text + i, '\n', n - i);
    size_t len = nl ? (size_t)(nl - (text + i)) + 1 : n - i;
    const char *line = text + i;
    if (len >= PLAIN_LEN && memcmp(line, plain, PLAIN_LEN) == 0) line += PLAIN_LEN, len -= PLAIN_LEN, i += PLAIN_LEN;
    memcpy(out + k, tag, t);
    memcpy(out + k + t, line, len);
    k += t + len;
    i += len;
  }
  write_all(out, k);   /* one write: the lines of one process stay together */
  free(out);
}

FILE *ca_log_block_begin(ca_log_block_t *b) {
  b->buf = NULL;
  b->n = 0;
  b->f = open_memstream(&b->buf, &b->n);
  if (!b->f) b->f = stderr;
  return b->f;
}

void ca_log_block_end(ca_log_block_t *b) {
  if (b->f == stderr) {
    fflush(stderr);
    return;
  }
  if (fclose(b->f) == 0 && b->buf) ca_log_text(b->buf, b->n);
  free(b->buf);
  b->f = NULL;
  b->buf = NULL;
}
