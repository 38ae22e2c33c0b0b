/* libFuzzer target: cudalloc's own event log (trace:PATH), read by the
 * recorder's reader for the replay. Whatever the bytes, the import either
 * succeeds with only the kinds the replay plays, or fails naming the byte
 * offset; it never crashes or reads past the input. Seeds:
 * tests/fuzz/corpus/fuzz_import_cudalloc/ (a preloaded alloc_basic's logs: format
 * version 1, and version 2 in full and ring mode). */
#include "fuzz_import.h"

static void check(const ca_trace_t *t) {
  REQUIRE(t->pre_end == 0);
  for (size_t i = 0; i < t->n; i++) {
    uint16_t k = t->ev[i].kind;
    REQUIRE(k == CA_EV_ALLOC || k == CA_EV_FREE_ASYNC || k == CA_EV_FREE_COMPLETED || k == CA_EV_OOM ||
            k == CA_EV_EMPTY_CACHE || k == CA_EV_STEP);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz_import(data, size, ca_import_cudalloc, "cudalloc trace: ", check);
}
