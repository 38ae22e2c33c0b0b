/* What every trace reader's fuzz target does (fuzz_import_*.c): import a
 * copy of exactly the input's bytes (so that ASan sees any read past the
 * end); on success every event's device is in range and check(t) holds,
 * on failure the message starts with the reader's prefix. A target
 * defines its reader, its prefix and its check, then includes this. */
#ifndef CUDALLOC_FUZZ_IMPORT_H
#define CUDALLOC_FUZZ_IMPORT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importers.h"

#define REQUIRE(cond)                                                        \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "fuzz_import: broken: %s\n", #cond);                   \
      abort();                                                               \
    }                                                                        \
  } while (0)

static int fuzz_import(const uint8_t *data, size_t size, ca_import_fn read, const char *prefix,
                       void (*check)(const ca_trace_t *t)) {
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  ca_trace_t t;
  ca_import_error_t err = {{0}};
  ca_trace_init(&t);
  int rc = read(copy, size, &t, &err);
  if (rc == 0) {
    REQUIRE(t.pre_end <= t.n);
    for (size_t i = 0; i < t.n; i++) REQUIRE(t.ev[i].device >= 0 && t.ev[i].device < CA_TRACE_MAX_DEVICES);
    check(&t);
  } else {
    REQUIRE(rc == -1);
    REQUIRE(strncmp(err.msg, prefix, strlen(prefix)) == 0);
  }
  ca_trace_dispose(&t);
  free(copy);
  return 0;
}

#endif
