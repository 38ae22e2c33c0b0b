/* libFuzzer target: RMM CSV logs. Whatever the bytes, the import either
 * succeeds with events of the kinds an RMM log has, or fails naming the
 * line; it never crashes or reads past the input. Seeds:
 * tests/fuzz/corpus/fuzz_import_rmm/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importers.h"

#define REQUIRE(cond)                                                        \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "fuzz_import_rmm: broken: %s\n", #cond);               \
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
  if (ca_import_rmm_csv(copy, size, &t, &err) == 0) {
    REQUIRE(t.pre_end == 0);
    for (size_t i = 0; i < t.n; i++) {
      uint16_t k = t.ev[i].kind;
      REQUIRE(k == CA_EV_ALLOC || k == CA_EV_FREE_ASYNC || k == CA_EV_FREE_COMPLETED || k == CA_EV_OOM);
      REQUIRE(t.ev[i].device == 0);
    }
  } else {
    REQUIRE(strncmp(err.msg, "rmm csv: line ", 14) == 0);
  }
  ca_trace_dispose(&t);
  free(copy);
  return 0;
}
