/* libFuzzer target: CUDALLOC_CONF strings. The parser must never crash,
 * never read past the string, and leave every field within the range its
 * key admits, whatever it is given; a refused item keeps the default. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define REQUIRE(cond)                                                        \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "fuzz_config: broken: %s\n", #cond);                   \
      abort();                                                               \
    }                                                                        \
  } while (0)

static void check_ranges(const ca_config_t *c) {
  REQUIRE(ca_backend_find(c->backend) != NULL);
  REQUIRE(memchr(c->report, 0, sizeof c->report) != NULL);
  REQUIRE(c->gc_threshold >= 0 && c->gc_threshold <= 1);
  REQUIRE(c->memory_fraction >= 0 && c->memory_fraction <= 1);
  REQUIRE(c->roundup_power2_divisions <= 64);
  REQUIRE((c->roundup_power2_divisions & (c->roundup_power2_divisions - 1)) == 0);
  REQUIRE(c->free_mode == CA_FREE_DEVICE || c->free_mode == CA_FREE_STREAM);
  REQUIRE(c->track <= CA_TRACK_BACKTRACE);   /* one of the choices: off, caller, stack, python, backtrace */
  REQUIRE(c->track_depth >= 1 && c->track_depth <= 64);
  REQUIRE(c->sim.devices >= 1 && c->sim.devices <= 16);
  REQUIRE(c->sim.granularity && (c->sim.granularity & (c->sim.granularity - 1)) == 0);
  REQUIRE(c->sim.capacity >= (1ull << 20));
  REQUIRE(c->sim.fail_count <= CA_BACKEND_MAX_FAULTS);
  for (unsigned i = 0; i < c->sim.fail_count; i++) REQUIRE((unsigned)c->sim.fail[i].op < CA_OP_COUNT);
  REQUIRE(c->sim.fail_rate >= 0 && c->sim.fail_rate <= 1);
  /* the front cache's caps (tcache_layout.h multiplies them: small_room) and the arenas */
  REQUIRE(c->thread_cache_kb <= (1u << 20) && c->thread_cache_large_mb <= (1u << 20));
  REQUIRE(c->thread_cache_streams >= 1 && c->thread_cache_streams <= 128);
  REQUIRE(c->arenas >= 1 && c->arenas <= CA_MAX_ARENAS);
  REQUIRE(c->arena_spread == CA_SPREAD_CONTENDED || c->arena_spread == CA_SPREAD_FIRST);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = 0;
  ca_config_t cfg;
  ca_config_defaults(&cfg);
  FILE *sink = fopen("/dev/null", "w");
  int problems = ca_config_parse(&cfg, s, sink);
  if (sink) fclose(sink);
  REQUIRE(problems >= 0);
  check_ranges(&cfg);
  /* Printing what was parsed must work for every accepted value. */
  FILE *out = fopen("/dev/null", "w");
  if (out) {
    ca_config_print(&cfg, out);
    fclose(out);
  }
  free(s);
  return 0;
}
