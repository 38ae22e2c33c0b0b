/* A small writer of Python pickles (protocol 2): dicts, lists, tuples,
 * ints, strings, booleans and None, enough for PyTorch's memory snapshot
 * (segments, device_traces) that pytorch.org/memory_viz and
 * torch/cuda/_memory_viz.py open. Calls nest as the values do:
 *   pk_dict(w); pk_str(w, "segments"); pk_list(w); ... pk_end(w); pk_end(w);
 * A dict's items are key then value, in turn. */
#ifndef CUDALLOC_PICKLE_WRITE_H
#define CUDALLOC_PICKLE_WRITE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define PK_MAX_DEPTH 32

typedef struct {
  FILE *f;
  bool failed;             /* a write failed, or the nesting was wrong */
  int depth;
  char open[PK_MAX_DEPTH]; /* 'd' dict, 'l' list, 't' tuple */
  int items[PK_MAX_DEPTH]; /* values given to an open tuple */
} pk_writer_t;

void pk_begin(pk_writer_t *w, FILE *f);
void pk_dict(pk_writer_t *w);
void pk_list(pk_writer_t *w);
void pk_tuple(pk_writer_t *w);
void pk_end(pk_writer_t *w);   /* closes the innermost dict, list or tuple */
void pk_int(pk_writer_t *w, int64_t v);
void pk_uint(pk_writer_t *w, uint64_t v);
void pk_str(pk_writer_t *w, const char *s);
void pk_bool(pk_writer_t *w, bool v);
void pk_none(pk_writer_t *w);
/* Ends the pickle; false when anything failed. */
bool pk_finish(pk_writer_t *w);

#endif /* CUDALLOC_PICKLE_WRITE_H */
