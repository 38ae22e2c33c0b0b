/* The table of trace readers (importers.h). */
#include "importers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Protocol 2 and later start with PROTO n; PyTorch writes 2 to 5. */
static bool sniff_pickle(const uint8_t *d, size_t n) { return n >= 2 && d[0] == 0x80 && d[1] >= 2 && d[1] <= 5; }

static bool sniff_rmm(const uint8_t *d, size_t n) {
  static const char head[] = "Thread,Time,Action,Pointer,Size,Stream";
  return n >= sizeof head - 1 && memcmp(d, head, sizeof head - 1) == 0;
}

static bool sniff_cudalloc(const uint8_t *d, size_t n) {
  return n >= sizeof CA_TRACE_MAGIC - 1 && memcmp(d, CA_TRACE_MAGIC, sizeof CA_TRACE_MAGIC - 1) == 0;
}

const ca_importer_t ca_importers[] = {
    {"pytorch-snapshot", ".pickle .pkl", sniff_pickle, ca_import_pytorch},
    {"rmm-csv", ".csv", sniff_rmm, ca_import_rmm_csv},
    {"cudalloc-trace", ".catrace .log", sniff_cudalloc, ca_import_cudalloc},
};
const size_t ca_nimporters = sizeof ca_importers / sizeof ca_importers[0];

static bool has_extension(const char *path, const char *list) {
  const char *dot = path ? strrchr(path, '.') : NULL;
  if (!dot || strchr(dot, '/')) return false;
  size_t len = strlen(dot);
  for (const char *e = list; *e;) {
    size_t n = strcspn(e, " ");
    if (n == len && strncmp(e, dot, n) == 0) return true;
    e += n + (e[n] == ' ');
  }
  return false;
}

const ca_importer_t *ca_importer_find(const char *path, const uint8_t *data, size_t n) {
  for (size_t i = 0; i < ca_nimporters; i++)
    if (ca_importers[i].sniff(data, n)) return &ca_importers[i];
  for (size_t i = 0; i < ca_nimporters; i++)
    if (has_extension(path, ca_importers[i].extensions)) return &ca_importers[i];
  return NULL;
}

int ca_import_buffer(const char *path, const uint8_t *data, size_t n, ca_trace_t *out, ca_import_error_t *err) {
  const ca_importer_t *im = ca_importer_find(path, data, n);
  if (!im) return ca_import_fail(err, "%s: not a format cudalloc reads (a PyTorch snapshot pickle, an RMM CSV log, a cudalloc trace)", path);
  if (!im->read) return ca_import_fail(err, "%s: a %s file, which this build has no reader for", path, im->name);
  out->format = im->name;
  return im->read(data, n, out, err);
}

int ca_import_file(const char *path, ca_trace_t *out, ca_import_error_t *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return ca_import_fail(err, "%s: %s", path, strerror(errno));
  size_t cap = 1 << 20, n = 0, got;
  uint8_t *buf = malloc(cap);
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    uint8_t *bigger = n == cap ? realloc(buf, cap *= 2) : buf;
    if (!bigger) free(buf);
    buf = bigger;
  }
  bool bad = ferror(f);
  fclose(f);
  int rc = !buf ? ca_import_fail(err, "%s: out of memory", path)
           : bad ? ca_import_fail(err, "%s: read error", path)
                 : ca_import_buffer(path, buf, n, out, err);
  free(buf);
  return rc;
}
