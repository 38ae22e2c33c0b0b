/* Pickle protocol 2, written opcode by opcode (Python's Lib/pickletools.py
 * documents each). A dict or list is its empty opcode, a MARK, its items,
 * then SETITEMS or APPENDS; a tuple is a MARK, its items, TUPLE. No memo:
 * nothing is shared, so nothing is referenced twice. */
#include "pickle_write.h"

#include <string.h>

enum {
  OP_PROTO = 0x80, OP_STOP = '.', OP_MARK = '(', OP_EMPTY_DICT = '}', OP_EMPTY_LIST = ']',
  OP_SETITEMS = 'u', OP_APPENDS = 'e', OP_TUPLE = 't', OP_BININT = 'J', OP_LONG1 = 0x8a,
  OP_BINUNICODE = 'X', OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_NONE = 'N',
};

static void bytes(pk_writer_t *w, const void *p, size_t n) {
  if (!w->failed && fwrite(p, 1, n, w->f) != n) w->failed = true;
}

static void op(pk_writer_t *w, int c) {
  unsigned char b = (unsigned char)c;
  bytes(w, &b, 1);
}

static void u32(pk_writer_t *w, uint32_t v) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
  bytes(w, b, 4);
}

void pk_begin(pk_writer_t *w, FILE *f) {
  memset(w, 0, sizeof *w);
  w->f = f;
  op(w, OP_PROTO);
  op(w, 2);
}

static void open_(pk_writer_t *w, char kind, int empty_op) {
  if (w->depth == PK_MAX_DEPTH) {
    w->failed = true;
    return;
  }
  if (empty_op) op(w, empty_op);
  op(w, OP_MARK);
  w->open[w->depth++] = kind;
}

void pk_dict(pk_writer_t *w) { open_(w, 'd', OP_EMPTY_DICT); }
void pk_list(pk_writer_t *w) { open_(w, 'l', OP_EMPTY_LIST); }
void pk_tuple(pk_writer_t *w) { open_(w, 't', 0); }

void pk_end(pk_writer_t *w) {
  if (!w->depth) {
    w->failed = true;
    return;
  }
  char kind = w->open[--w->depth];
  op(w, kind == 'd' ? OP_SETITEMS : kind == 'l' ? OP_APPENDS : OP_TUPLE);
}

void pk_int(pk_writer_t *w, int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    op(w, OP_BININT);
    u32(w, (uint32_t)(int32_t)v);
    return;
  }
  /* LONG1: a length byte, then the value in little-endian two's complement. */
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)v >> (8 * i));
  op(w, OP_LONG1);
  op(w, 8);
  bytes(w, b, 8);
}

void pk_uint(pk_writer_t *w, uint64_t v) {
  if (v <= INT64_MAX) {
    pk_int(w, (int64_t)v);
    return;
  }
  unsigned char b[9] = {0};   /* a ninth byte keeps the sign bit clear */
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
  op(w, OP_LONG1);
  op(w, 9);
  bytes(w, b, 9);
}

/* Python decodes BINUNICODE as UTF-8 and refuses a bad sequence: bytes
 * outside ASCII (a symbol's name is ASCII) are written as '?'. */
void pk_str(pk_writer_t *w, const char *s) {
  size_t n = strlen(s);
  op(w, OP_BINUNICODE);
  u32(w, (uint32_t)n);
  for (size_t i = 0; i < n; i++) op(w, (unsigned char)s[i] < 0x80 ? s[i] : '?');
}

void pk_bool(pk_writer_t *w, bool v) { op(w, v ? OP_NEWTRUE : OP_NEWFALSE); }
void pk_none(pk_writer_t *w) { op(w, OP_NONE); }

bool pk_finish(pk_writer_t *w) {
  if (w->depth) w->failed = true;
  op(w, OP_STOP);
  return !w->failed;
}
