/* libFuzzer target: RMM CSV logs. Whatever the bytes, the import either
 * succeeds with events of the kinds an RMM log has, or fails naming the
 * line; it never crashes or reads past the input. Seeds:
 * tests/fuzz/corpus/fuzz_import_rmm/. */
#include "fuzz_import.h"

static void check(const ca_trace_t *t) {
  REQUIRE(t->pre_end == 0);
  for (size_t i = 0; i < t->n; i++) {
    uint16_t k = t->ev[i].kind;
    REQUIRE(k == CA_EV_ALLOC || k == CA_EV_FREE_ASYNC || k == CA_EV_FREE_COMPLETED || k == CA_EV_OOM);
    REQUIRE(t->ev[i].device == 0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz_import(data, size, ca_import_rmm_csv, "rmm csv: line ", check);
}
