/* Helpers of the importer and replay suites: the shared PyTorch snapshots
 * (../shared/traces, or $CUDALLOC_TRACES) with the figures their README
 * gives, and importing a file or a buffer with the test failing on error. */
#ifndef CUDALLOC_REPLAY_TESTING_H
#define CUDALLOC_REPLAY_TESTING_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "importers.h"
#include "stderr_capture.h"

#define MiB (1ull << 20)

/* ../shared/traces/README.md: events per device of each snapshot. */
typedef struct {
  const char *file;
  int ndevices;
  size_t events[3];
  size_t pre;   /* blocks live before the trace began */
} shared_snapshot_t;

static const shared_snapshot_t shared_snapshots[] = {
    {"cs336-transformer-step.pickle", 1, {97}, 0},
    {"decomfl-opt125m.pickle", 1, {23105}, 0},
    {"constructor-sun-gcn-3gpu-expandable.pickle", 3, {6445, 596, 882}, 0},
    {"select-n-llama7b-10streams.pickle", 1, {10327}, 195},
};
#define N_SHARED (sizeof shared_snapshots / sizeof shared_snapshots[0])

/* The folder of the shared snapshots: a missing folder fails the test (it
 * is part of the repository's CI), naming where it was looked for. */
static inline const char *traces_dir(void) {
  const char *env = getenv("CUDALLOC_TRACES");
  static const char *const tries[] = {"../shared/traces", "../../shared/traces"};
  if (env && *env) return env;
  for (size_t i = 0; i < 2; i++)
    if (access(tries[i], R_OK) == 0) return tries[i];
  cr_assert_fail("the shared snapshots are in neither ../shared/traces nor ../../shared/traces (set CUDALLOC_TRACES)");
  return NULL;
}

static inline void shared_path(char *buf, size_t cap, const char *file) {
  snprintf(buf, cap, "%s/%s", traces_dir(), file);
}

static inline void import_ok(const char *path, ca_trace_t *t) {
  ca_import_error_t err = {{0}};
  ca_trace_init(t);
  cr_assert_eq(ca_import_file(path, t, &err), 0, "importing %s failed: %s", path, err.msg);
}

/* The whole file at path (the caller frees it). */
static inline uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  rewind(f);
  uint8_t *buf = malloc((size_t)len + 1);
  cr_assert_not_null(buf);
  cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return buf;
}

#endif
