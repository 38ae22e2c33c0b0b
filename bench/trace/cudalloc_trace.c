/* cudalloc-trace: reads an event log (CUDALLOC_CONF=trace:PATH) and writes
 * it in a viewer's format.
 *   cudalloc-trace pytorch  LOG OUT.pickle   PyTorch memory snapshot (memory_viz)
 *   cudalloc-trace perfetto LOG OUT.json     Chrome trace event JSON (Perfetto)
 *   cudalloc-trace rmm      LOG OUT.csv      RMM's CSV log
 *   cudalloc-trace summary  LOG [OUT]        event counts and peaks, one per line
 * OUT "-" is stdout. Exit status 0, 1 on a bad log (the message names the
 * offset), 2 on bad usage. */
#include <stdio.h>
#include <string.h>

#include "exports.h"

static const struct {
  const char *name;
  int (*fn)(const ca_trace_data_t *, FILE *, char *, size_t);
  const char *mode;
} exports[] = {
  {"pytorch", export_pytorch, "wb"},
  {"perfetto", export_perfetto, "w"},
  {"rmm", export_rmm, "w"},
  {"summary", export_summary, "w"},
};

static int usage(void) {
  fprintf(stderr, "usage: cudalloc-trace pytorch|perfetto|rmm|summary LOG [OUT|-]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) return usage();
  size_t e = 0, n = sizeof exports / sizeof *exports;
  while (e < n && strcmp(argv[1], exports[e].name)) e++;
  if (e == n) return usage();
  char err[512];
  ca_trace_data_t t;
  if (ca_trace_read(argv[2], &t, err, sizeof err)) {
    fprintf(stderr, "cudalloc-trace: %s: %s\n", argv[2], err);
    return 1;
  }
  if (!t.complete)
    fprintf(stderr, "cudalloc-trace: %s ends before its end record (the process did not exit cleanly): "
                    "%zu events, no call sites\n", argv[2], t.nevents);
  const char *to = argc == 4 ? argv[3] : "-";
  FILE *out = strcmp(to, "-") ? fopen(to, exports[e].mode) : stdout;
  int rc = 1;
  if (!out) fprintf(stderr, "cudalloc-trace: cannot create %s\n", to);
  else if (exports[e].fn(&t, out, err, sizeof err)) fprintf(stderr, "cudalloc-trace: %s: %s\n", argv[2], err);
  else rc = 0;
  if (out && out != stdout && fclose(out)) rc = 1;
  ca_trace_data_free(&t);
  return rc;
}
