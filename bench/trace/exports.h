/* The exports of cudalloc-trace: a read log to a viewer's format. Each
 * returns 0, or -1 with a message in err. */
#ifndef CUDALLOC_TRACE_EXPORTS_H
#define CUDALLOC_TRACE_EXPORTS_H

#include <stdio.h>

#include "trace_read.h"

/* PyTorch's memory snapshot pickle (pytorch.org/memory_viz, torch/cuda/_memory_viz.py). */
int export_pytorch(const ca_trace_data_t *t, FILE *out, char *err, size_t cap);
/* Chrome trace event JSON (Perfetto, chrome://tracing): counters allocated,
 * reserved, pending per device, live bytes of the top call sites; instant
 * events for OOMs and steps. */
int export_perfetto(const ca_trace_data_t *t, FILE *out, char *err, size_t cap);
/* RMM's logging_resource_adaptor CSV: Thread,Time,Action,Pointer,Size,Stream. */
int export_rmm(const ca_trace_data_t *t, FILE *out, char *err, size_t cap);
/* One line per figure: events by kind, and per device the model's counts
 * and peaks (what the tests compare with the recorded run's stats). */
int export_summary(const ca_trace_data_t *t, FILE *out, char *err, size_t cap);

#endif /* CUDALLOC_TRACE_EXPORTS_H */
