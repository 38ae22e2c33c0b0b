/* libFuzzer target: PyTorch memory snapshots (the strict pickle reader and
 * the snapshot importer). Whatever the bytes, the import either succeeds
 * with events whose devices are in range and whose pre-trace blocks come
 * first, or fails with a message naming where; it never crashes or reads
 * past the input. Seeds: tests/fuzz/corpus/fuzz_import_pytorch/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "importers.h"

#define REQUIRE(cond)                                                        \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "fuzz_import_pytorch: broken: %s\n", #cond);           \
      abort();                                                               \
    }                                                                        \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* a copy of exactly size bytes, so that ASan sees any read past the end */
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  ca_trace_t t;
  ca_import_error_t err = {{0}};
  ca_trace_init(&t);
  int rc = ca_import_pytorch(copy, size, &t, &err);
  if (rc == 0) {
    REQUIRE(t.pre_end <= t.n);
    for (size_t i = 0; i < t.n; i++) {
      REQUIRE(t.ev[i].device >= 0 && t.ev[i].device < CA_TRACE_MAX_DEVICES);
      REQUIRE(t.ev[i].kind >= CA_EV_ALLOC && t.ev[i].kind < CA_EV_KIND_END);
      if (i < t.pre_end) REQUIRE(t.ev[i].kind == CA_EV_ALLOC);
    }
  } else {
    REQUIRE(rc == -1);
    REQUIRE(strncmp(err.msg, "pytorch snapshot: ", 18) == 0);
  }
  ca_trace_dispose(&t);
  free(copy);
  return 0;
}
