/* Captures what a piece of code writes on file descriptor 2 (stdio's stderr
 * and ca_log's write(2) alike), so that a test can count the lines. */
#ifndef CUDALLOC_STDERR_CAPTURE_H
#define CUDALLOC_STDERR_CAPTURE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct capture_s {
  int saved;     /* the real stderr, put back by capture_end() */
  FILE *file;    /* where fd 2 points in between */
} capture_t;

static inline void capture_begin(capture_t *c) {
  fflush(stderr);
  c->file = tmpfile();
  cr_assert_not_null(c->file, "tmpfile() failed");
  c->saved = dup(2);
  cr_assert_geq(c->saved, 0);
  cr_assert_geq(dup2(fileno(c->file), 2), 0);
}

/* Restores stderr and returns what was written (NUL-terminated, cut at cap). */
static inline const char *capture_end(capture_t *c, char *buf, size_t cap) {
  fflush(stderr);
  dup2(c->saved, 2);
  close(c->saved);
  rewind(c->file);
  size_t n = fread(buf, 1, cap - 1, c->file);
  buf[n] = 0;
  fclose(c->file);
  return buf;
}

static inline int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

#endif
