/* The strict pickle reader (pickle.h): a stack machine over the opcodes
 * that plain data uses, with the memo. Every length is checked against
 * what is left of the input before it is used. */
#include "pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_VALUES 4096

struct pk_chunk_s {
  pk_chunk_t *next;
  size_t used;
  pk_value_t v[CHUNK_VALUES];
};

typedef struct {
  pk_doc_t *doc;
  const uint8_t *p;
  size_t n, pos, op_pos;            /* op_pos: where the current opcode began */
  pk_value_t **stack;
  size_t sp, stack_cap;
  pk_value_t **memo;
  size_t nmemo, memo_cap;
} reader_t;

static int fail(reader_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(reader_t *r, const char *fmt, ...) {
  char what[150];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(r->doc->error, sizeof r->doc->error, "pickle: byte offset %zu: %s", r->op_pos, what);
  return -1;
}

static pk_value_t *new_value(reader_t *r, pk_kind_t kind) {
  pk_chunk_t *c = r->doc->chunks;
  if (!c || c->used == CHUNK_VALUES) {
    c = malloc(sizeof *c);
    if (!c) return NULL;
    c->next = r->doc->chunks;
    c->used = 0;
    r->doc->chunks = c;
  }
  pk_value_t *v = &c->v[c->used++];
  memset(v, 0, sizeof *v);
  v->kind = kind;
  return v;
}

// ----------------------------------------------------------------------------
// Input, stack and memo
// ----------------------------------------------------------------------------

/* The next len bytes, or NULL when the input ends first. */
static const uint8_t *take(reader_t *r, size_t len) {
  if (len > r->n - r->pos) return NULL;
  const uint8_t *at = r->p + r->pos;
  r->pos += len;
  return at;
}

static uint64_t le(const uint8_t *b, size_t len) {
  uint64_t x = 0;
  for (size_t i = len; i-- > 0;) x = x << 8 | b[i];
  return x;
}

/* An unsigned little-endian argument of len bytes. */
static int arg(reader_t *r, size_t len, uint64_t *out) {
  const uint8_t *b = take(r, len);
  if (!b) return fail(r, "the input ends inside an opcode's argument");
  *out = le(b, len);
  return 0;
}

static int push(reader_t *r, pk_value_t *v) {
  if (!v) return fail(r, "out of memory");
  if (r->sp == r->stack_cap) {
    size_t cap = r->stack_cap ? r->stack_cap * 2 : 64;
    pk_value_t **s = realloc(r->stack, cap * sizeof *s);
    if (!s) return fail(r, "out of memory");
    r->stack = s;
    r->stack_cap = cap;
  }
  r->stack[r->sp++] = v;
  return 0;
}

static pk_value_t *top(reader_t *r) { return r->sp ? r->stack[r->sp - 1] : NULL; }

/* Index of the topmost MARK, or -1. */
static long mark_index(const reader_t *r) {
  for (size_t i = r->sp; i-- > 0;)
    if (r->stack[i]->kind == PK_MARK) return (long)i;
  return -1;
}

static bool seq_add(pk_value_t *seq, pk_value_t *item) {
  if (seq->seq.n == seq->seq.cap) {
    size_t cap = seq->seq.cap ? seq->seq.cap * 2 : 4;
    pk_value_t **v = realloc(seq->seq.items, cap * sizeof *v);
    if (!v) return false;
    seq->seq.items = v;
    seq->seq.cap = cap;
  }
  seq->seq.items[seq->seq.n++] = item;
  return true;
}

static int memo_put(reader_t *r, uint64_t idx) {
  if (!r->sp || top(r)->kind == PK_MARK) return fail(r, "memo store without a value on the stack");
  if (idx > r->nmemo) return fail(r, "memo index %llu skips entries", (unsigned long long)idx);
  if (idx == r->nmemo) {
    if (r->nmemo == r->memo_cap) {
      size_t cap = r->memo_cap ? r->memo_cap * 2 : 256;
      pk_value_t **m = realloc(r->memo, cap * sizeof *m);
      if (!m) return fail(r, "out of memory");
      r->memo = m;
      r->memo_cap = cap;
    }
    r->nmemo++;
  }
  r->memo[idx] = top(r);
  return 0;
}

static int memo_get(reader_t *r, uint64_t idx) {
  if (idx >= r->nmemo) return fail(r, "memo index %llu was never stored", (unsigned long long)idx);
  return push(r, r->memo[idx]);
}

// ----------------------------------------------------------------------------
// Opcodes
// ----------------------------------------------------------------------------

static int push_int(reader_t *r, int64_t i) {
  pk_value_t *v = new_value(r, PK_INT);
  if (v) v->i = i;
  return push(r, v);
}

/* LONG1/LONG4: little-endian two's complement of len bytes; more than 64
 * bits is refused (no snapshot field needs it). */
static int push_long(reader_t *r, uint64_t len) {
  if (len > 8) return fail(r, "an integer of %llu bytes is too large", (unsigned long long)len);
  const uint8_t *b = take(r, (size_t)len);
  if (!b) return fail(r, "the input ends inside an integer");
  uint64_t x = len ? le(b, (size_t)len) : 0;
  if (len && len < 8 && (b[len - 1] & 0x80)) x |= ~0ull << (8 * len);   /* sign-extend */
  return push_int(r, (int64_t)x);
}

static int push_str(reader_t *r, pk_kind_t kind, uint64_t len) {
  if (len > r->n - r->pos) return fail(r, "a string of %llu bytes runs past the end of the input", (unsigned long long)len);
  pk_value_t *v = new_value(r, kind);
  if (v) {
    v->str.p = (const char *)take(r, (size_t)len);
    v->str.n = (size_t)len;
  }
  return push(r, v);
}

static int push_float(reader_t *r) {
  const uint8_t *b = take(r, 8);
  if (!b) return fail(r, "the input ends inside a float");
  uint64_t bits = 0;
  for (int i = 0; i < 8; i++) bits = bits << 8 | b[i];   /* big-endian */
  pk_value_t *v = new_value(r, PK_FLOAT);
  if (v) memcpy(&v->f, &bits, sizeof v->f);
  return push(r, v);
}

/* TUPLE1..3 (n items) or TUPLE (n < 0: everything above the mark). */
static int make_tuple(reader_t *r, long n) {
  long base = n < 0 ? mark_index(r) + 1 : (long)r->sp - n;
  if (n < 0 && base == 0) return fail(r, "TUPLE without a MARK");
  if (base < 0) return fail(r, "a tuple of %ld items on a stack of %zu", n, r->sp);
  pk_value_t *t = new_value(r, PK_TUPLE);
  if (!t) return fail(r, "out of memory");
  for (size_t i = (size_t)base; i < r->sp; i++)
    if (r->stack[i]->kind == PK_MARK || !seq_add(t, r->stack[i])) return fail(r, "a bad tuple item");
  r->sp = (size_t)(n < 0 ? base - 1 : base);
  return push(r, t);
}

/* APPEND(S) and SETITEM(S): the items from stack[from] up go into the
 * container at stack[at], and the stack is cut back to `to`. */
static int fill(reader_t *r, size_t at, size_t from, size_t to, pk_kind_t want, size_t group) {
  pk_value_t *c = r->stack[at];
  if (c->kind != want)
    return fail(r, "%s into something that is not a %s", want == PK_DICT ? "SETITEM" : "APPEND",
                want == PK_DICT ? "dict" : "list");
  if ((r->sp - from) % group) return fail(r, "a key without its value");
  for (size_t i = from; i < r->sp; i++)
    if (r->stack[i]->kind == PK_MARK || !seq_add(c, r->stack[i])) return fail(r, "a bad item");
  r->sp = to;
  return 0;
}

/* The MARK form: the container is just below the mark. */
static int fill_marked(reader_t *r, pk_kind_t want, size_t group) {
  long m = mark_index(r);
  if (m < 1) return fail(r, m < 0 ? "no MARK before the items" : "no container below the MARK");
  return fill(r, (size_t)m - 1, (size_t)m + 1, (size_t)m, want, group);
}

/* The single-item form: the container is just below the item(s). */
static int fill_one(reader_t *r, pk_kind_t want, size_t group) {
  if (r->sp < group + 1) return fail(r, "too few values on the stack");
  return fill(r, r->sp - group - 1, r->sp - group, r->sp - group, want, group);
}

static int simple_value(reader_t *r, pk_kind_t kind, int64_t i) {
  pk_value_t *v = new_value(r, kind);
  if (v) v->i = i;
  return push(r, v);
}

/* One opcode; 1 at STOP. */
static int step(reader_t *r) {
  r->op_pos = r->pos;
  const uint8_t *opp = take(r, 1);
  if (!opp) return fail(r, "the input ends before STOP");
  uint64_t x = 0;
  switch (*opp) {
  case 0x80: /* PROTO */
    if (arg(r, 1, &x)) return -1;
    if (x < 2 || x > 5) return fail(r, "protocol %llu (this reader knows 2 to 5)", (unsigned long long)x);
    return 0;
  case 0x95: /* FRAME: a length hint; the opcodes inside are read as any others */
    if (arg(r, 8, &x)) return -1;
    if (x > r->n - r->pos) return fail(r, "a frame of %llu bytes runs past the end of the input", (unsigned long long)x);
    return 0;
  case '.': return 1; /* STOP */
  case '(': return simple_value(r, PK_MARK, 0);
  case '}': return simple_value(r, PK_DICT, 0);
  case ']': return simple_value(r, PK_LIST, 0);
  case ')': return simple_value(r, PK_TUPLE, 0);
  case 'N': return simple_value(r, PK_NONE, 0);
  case 0x88: return simple_value(r, PK_BOOL, 1);
  case 0x89: return simple_value(r, PK_BOOL, 0);
  case 'J': return arg(r, 4, &x) ? -1 : push_int(r, (int32_t)(uint32_t)x);
  case 'K': return arg(r, 1, &x) ? -1 : push_int(r, (int64_t)x);
  case 'M': return arg(r, 2, &x) ? -1 : push_int(r, (int64_t)x);
  case 0x8a: return arg(r, 1, &x) ? -1 : push_long(r, x);
  case 0x8b: return arg(r, 4, &x) ? -1 : push_long(r, x);
  case 'G': return push_float(r);
  case 0x8c: return arg(r, 1, &x) ? -1 : push_str(r, PK_STR, x);
  case 'X': return arg(r, 4, &x) ? -1 : push_str(r, PK_STR, x);
  case 0x8d: return arg(r, 8, &x) ? -1 : push_str(r, PK_STR, x);
  case 'C': return arg(r, 1, &x) ? -1 : push_str(r, PK_BYTES, x);
  case 'B': return arg(r, 4, &x) ? -1 : push_str(r, PK_BYTES, x);
  case 0x8e: return arg(r, 8, &x) ? -1 : push_str(r, PK_BYTES, x);
  case 0x85: return make_tuple(r, 1);
  case 0x86: return make_tuple(r, 2);
  case 0x87: return make_tuple(r, 3);
  case 't': return make_tuple(r, -1);
  case 'a': return fill_one(r, PK_LIST, 1);
  case 'e': return fill_marked(r, PK_LIST, 1);
  case 's': return fill_one(r, PK_DICT, 2);
  case 'u': return fill_marked(r, PK_DICT, 2);
  case 0x94: return memo_put(r, r->nmemo);
  case 'q': return arg(r, 1, &x) ? -1 : memo_put(r, x);
  case 'r': return arg(r, 4, &x) ? -1 : memo_put(r, x);
  case 'h': return arg(r, 1, &x) ? -1 : memo_get(r, x);
  case 'j': return arg(r, 4, &x) ? -1 : memo_get(r, x);
  default: return fail(r, "opcode 0x%02x is not one of plain data's", *opp);
  }
}

int pk_parse(pk_doc_t *doc, const uint8_t *data, size_t n) {
  memset(doc, 0, sizeof *doc);
  reader_t r = {.doc = doc, .p = data, .n = n};
  int rc;
  while ((rc = step(&r)) == 0) {}
  if (rc == 1) {
    if (r.sp != 1 || top(&r)->kind == PK_MARK) rc = fail(&r, "STOP with %zu values on the stack (1 expected)", r.sp);
    else if (r.pos != n) rc = fail(&r, "%zu bytes after STOP", n - r.pos);
    else {
      doc->root = top(&r);
      rc = 0;
    }
  }
  free(r.stack);
  free(r.memo);
  return rc;
}

void pk_free(pk_doc_t *doc) {
  for (pk_chunk_t *c = doc->chunks, *next; c; c = next) {
    next = c->next;
    for (size_t i = 0; i < c->used; i++)
      if (c->v[i].kind == PK_LIST || c->v[i].kind == PK_TUPLE || c->v[i].kind == PK_DICT) free(c->v[i].seq.items);
    free(c);
  }
  doc->chunks = NULL;
  doc->root = NULL;
}

bool pk_str_is(const pk_value_t *v, const char *s) {
  return v && v->kind == PK_STR && v->str.n == strlen(s) && memcmp(v->str.p, s, v->str.n) == 0;
}

const pk_value_t *pk_get(const pk_value_t *dict, const char *key) {
  if (!dict || dict->kind != PK_DICT) return NULL;
  for (size_t i = 0; i + 1 < dict->seq.n; i += 2)
    if (pk_str_is(dict->seq.items[i], key)) return dict->seq.items[i + 1];
  return NULL;
}
