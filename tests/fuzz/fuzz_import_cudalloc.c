/* libFuzzer target: cudalloc's own event log. Whatever the bytes, the import either
 * succeeds with only the kinds the replay plays, or fails naming the
 * byte offset; it never crashes or reads past the input. Seeds:
 * tests/fuzz/corpus/fuzz_import_cudalloc/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importers.h"

#define REQUIRE(cond)                                                        \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "fuzz_import_cudalloc: broken: %s\n", #cond);               \
      abort();                                                               \
    }                                                                        \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  ca_trace_t t;
  ca_import_error_t err = {{0}};
  ca_trace_init(&t);
  if (ca_import_cudalloc(copy, size, &t, &err) == 0) {
    REQUIRE(t.pre_end == 0);
    for (size_t i = 0; i < t.n; i++) {
      uint16_t k = t.ev[i].kind;
      REQUIRE(k == CA_EV_ALLOC || k == CA_EV_FREE_ASYNC || k == CA_EV_FREE_COMPLETED || k == CA_EV_OOM ||
              k == CA_EV_EMPTY_CACHE || k == CA_EV_STEP);
      REQUIRE(t.ev[i].device >= 0 && t.ev[i].device < CA_TRACE_MAX_DEVICES);
    }
  } else {
    REQUIRE(strncmp(err.msg, "cudalloc trace: ", 16) == 0);
  }
  ca_trace_dispose(&t);
  free(copy);
  return 0;
}
