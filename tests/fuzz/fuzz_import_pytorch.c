/* libFuzzer target: PyTorch memory snapshots (the strict pickle reader and
 * the snapshot importer). Whatever the bytes, the import either succeeds
 * with events whose devices are in range and whose pre-trace blocks come
 * first, or fails with a message naming where; it never crashes or reads
 * past the input. Seeds: tests/fuzz/corpus/fuzz_import_pytorch/. */
#include "fuzz_import.h"

static void check(const ca_trace_t *t) {
  for (size_t i = 0; i < t->n; i++) {
    REQUIRE(t->ev[i].kind >= CA_EV_ALLOC && t->ev[i].kind < CA_EV_KIND_END);
    if (i < t->pre_end) REQUIRE(t->ev[i].kind == CA_EV_ALLOC);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz_import(data, size, ca_import_pytorch, "pytorch snapshot: ", check);
}
