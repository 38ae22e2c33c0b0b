/* The readers of allocation traces, one per format, in one table: a file
 * is recognised by its first bytes, else by its extension. A reader fills
 * a ca_trace_t (trace_events.h) from a buffer, or fails with an error that
 * names the byte offset or line; it never crashes on bad input
 * (tests/fuzz/fuzz_import_*.c).
 *
 * To add a format: write its reader (same signature as ca_import_pytorch)
 * and give it a row in the table of importers.c. */
#ifndef CUDALLOC_IMPORTERS_H
#define CUDALLOC_IMPORTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace_events.h"

/* Reads data[0, n) into out (appending); 0, or -1 with err set. */
typedef int (*ca_import_fn)(const uint8_t *data, size_t n, ca_trace_t *out, ca_import_error_t *err);

typedef struct {
  const char *name;        /* "pytorch-snapshot" */
  const char *extensions;  /* space-separated, with the dot: ".pickle .pkl" */
  bool (*sniff)(const uint8_t *data, size_t n);   /* true when the bytes are this format's */
  ca_import_fn read;       /* NULL: the format is known but no reader is built in */
} ca_importer_t;

extern const ca_importer_t ca_importers[];
extern const size_t ca_nimporters;

/* The importer for a file: by its first bytes, else by path's extension; NULL when none. */
const ca_importer_t *ca_importer_find(const char *path, const uint8_t *data, size_t n);
/* Reads a whole buffer with the importer ca_importer_find picks. */
int ca_import_buffer(const char *path, const uint8_t *data, size_t n, ca_trace_t *out, ca_import_error_t *err);
/* Reads the file at path. */
int ca_import_file(const char *path, ca_trace_t *out, ca_import_error_t *err);

/* The readers. */
int ca_import_pytorch(const uint8_t *data, size_t n, ca_trace_t *out, ca_import_error_t *err);
int ca_import_rmm_csv(const uint8_t *data, size_t n, ca_trace_t *out, ca_import_error_t *err);
int ca_import_cudalloc(const uint8_t *data, size_t n, ca_trace_t *out, ca_import_error_t *err);

#endif
