/* Captures what a piece of code writes on file descriptor 2 (stdio's stderr
 * and ca_log's write(2) alike), so that a test can assert on the lines it
 * expects instead of spilling them into `make test`'s output. A file, not a
 * pipe: a capture of any size never blocks the writer. */
#ifndef CUDALLOC_STDERR_CAPTURE_H
#define CUDALLOC_STDERR_CAPTURE_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct capture_s {
  int saved;     /* the real stderr, put back by capture_end() */
  FILE *file;    /* where fd 2 points in between */
} capture_t;

/* The sanitizers' reports go to the real stderr while fd 2 is captured: a
 * report swallowed by a capture would leave a test that only crashed.
 * Weak: present in the sanitizer builds alone. */
extern void __sanitizer_set_report_fd(void *fd) __attribute__((weak));
static inline void capture_sanitizer_reports_to(int fd) {
  if (__sanitizer_set_report_fd) __sanitizer_set_report_fd((void *)(intptr_t)fd);
}

static inline void capture_begin(capture_t *c) {
  fflush(stderr);
  c->file = tmpfile();
  cr_assert_not_null(c->file, "tmpfile() failed");
  c->saved = dup(2);
  cr_assert_geq(c->saved, 0);
  capture_sanitizer_reports_to(c->saved);
  cr_assert_geq(dup2(fileno(c->file), 2), 0);
}

/* stderr put back (what was written stays in c->file). */
static inline void capture_restore(capture_t *c) {
  fflush(stderr);
  dup2(c->saved, 2);
  capture_sanitizer_reports_to(2);
  close(c->saved);
}

/* Restores stderr and returns what was written (NUL-terminated, cut at cap). */
static inline const char *capture_end(capture_t *c, char *buf, size_t cap) {
  capture_restore(c);
  rewind(c->file);
  size_t n = fread(buf, 1, cap - 1, c->file);
  buf[n] = 0;
  fclose(c->file);
  return buf;
}

/* Restores stderr and returns everything that was written, whatever its
 * size (malloc'd, NUL-terminated: the caller frees it). */
static inline char *capture_end_all(capture_t *c) {
  capture_restore(c);
  long size = ftell(c->file);
  cr_assert_geq(size, 0);
  char *buf = malloc((size_t)size + 1);
  cr_assert_not_null(buf);
  rewind(c->file);
  size_t n = fread(buf, 1, (size_t)size, c->file);
  buf[n] = 0;
  fclose(c->file);
  return buf;
}

/* Runs fn() with stderr captured and discarded: for what a test does
 * not look at (a fixture's teardown). */
static inline void capture_discard(void (*fn)(void)) {
  capture_t c;
  char sink[1];
  capture_begin(&c);
  fn();
  capture_end(&c, sink, sizeof sink);
}

static inline int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static inline int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

#endif
