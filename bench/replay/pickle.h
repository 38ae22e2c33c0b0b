/* A strict reader of Python pickles of plain data (protocols 2 to 5):
 * dicts, lists, tuples, str, bytes, int, float, bool and None, which is
 * what PyTorch's memory snapshots are. Anything else (a class, a global, a
 * reduce) is refused with its byte offset: reading a pickle must never run
 * or build anything the file names, and never crash on a bad file.
 *
 * Values live in the reader's arena and strings point into the input
 * buffer, which must outlive them; pk_free gives everything back. */
#ifndef CUDALLOC_PICKLE_H
#define CUDALLOC_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { PK_NONE, PK_BOOL, PK_INT, PK_FLOAT, PK_STR, PK_BYTES, PK_LIST, PK_TUPLE, PK_DICT, PK_MARK } pk_kind_t;

typedef struct pk_value_s pk_value_t;
struct pk_value_s {
  pk_kind_t kind;
  union {
    int64_t i;      /* PK_INT, PK_BOOL */
    double f;       /* PK_FLOAT */
    struct {
      const char *p;
      size_t n;
    } str;          /* PK_STR (UTF-8, not NUL-terminated), PK_BYTES */
    struct {
      pk_value_t **items;   /* PK_DICT: key, value, key, value... */
      size_t n, cap;
    } seq;
  };
};

typedef struct pk_chunk_s pk_chunk_t;
typedef struct {
  pk_chunk_t *chunks;       /* the arena of every value */
  pk_value_t *root;
  char error[200];
} pk_doc_t;

/* Reads the pickle in data[0, n); 0 and doc->root set, or -1 with
 * doc->error saying what is wrong at which byte offset. Either way pk_free
 * releases what was built. */
int pk_parse(pk_doc_t *doc, const uint8_t *data, size_t n);
void pk_free(pk_doc_t *doc);

/* dict[key] for a str key, or NULL (also when dict is not a dict). */
const pk_value_t *pk_get(const pk_value_t *dict, const char *key);
/* true when v is a str equal to s. */
bool pk_str_is(const pk_value_t *v, const char *s);

#endif
