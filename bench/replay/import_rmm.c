/* RMM's memory event log (rmm::mr::logging_resource_adaptor, RMM_LOG_FILE):
 *   Thread,Time,Action,Pointer,Size,Stream
 *   140573312345856,1634567890.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020
 * Actions: allocate, free (deallocate in newer RMM), allocate failure.
 * Time: seconds (a decimal), or the older HH:MM:SS:microseconds. RMM logs
 * one device; it says nothing of when a free's stream work completed, so
 * a free is taken as complete at once (a FREE_ASYNC then FREE_COMPLETED). */
#include "importers.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define NFIELDS 6

typedef struct {
  const char *p;
  size_t n;
} field_t;

static bool field_is(field_t f, const char *s) { return f.n == strlen(s) && memcmp(f.p, s, f.n) == 0; }

/* An unsigned integer, decimal or 0x-hexadecimal, the whole field. */
static bool parse_u64(field_t f, uint64_t *out) {
  size_t i = 0;
  int base = 10;
  if (f.n > 2 && f.p[0] == '0' && (f.p[1] == 'x' || f.p[1] == 'X')) base = 16, i = 2;
  if (i == f.n) return false;
  uint64_t x = 0;
  for (; i < f.n; i++) {
    int c = tolower((unsigned char)f.p[i]), d;
    if (isdigit(c)) d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return false;
    if (x > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return false;
    x = x * (uint64_t)base + (uint64_t)d;
  }
  *out = x;
  return true;
}

/* Time in ns: "S.fraction" (seconds) or "H:M:S:us" / "H:M:S.fraction". */
static bool parse_time(field_t f, uint64_t *ns) {
  uint64_t parts[4] = {0};
  unsigned np = 0;
  size_t i = 0, frac_digits = 0;
  bool frac = false;
  uint64_t fraction = 0;
  while (i < f.n) {
    size_t start = i;
    uint64_t x = 0;
    while (i < f.n && isdigit((unsigned char)f.p[i]) && i - start < 18) x = x * 10 + (uint64_t)(f.p[i++] - '0');
    if (i == start || np == 4) return false;
    if (frac) fraction = x, frac_digits = i - start;
    else parts[np++] = x;
    if (i == f.n) break;
    if (f.p[i] == '.' && !frac) frac = true;
    else if (f.p[i] != ':' || frac) return false;
    i++;
    if (i == f.n) return false;
  }
  if (np == 0) return false;
  uint64_t sec = np == 1 ? parts[0] : parts[0] * 3600 + parts[1] * 60 + (np > 2 ? parts[2] : 0);
  uint64_t sub = 0;
  if (np == 4) sub = parts[3] * 1000;   /* H:M:S:us */
  if (frac) {
    for (; frac_digits < 9; frac_digits++) fraction *= 10;
    for (; frac_digits > 9; frac_digits--) fraction /= 10;
    sub = fraction;
  }
  *ns = sec * 1000000000ull + sub;
  return true;
}

/* Splits one line into exactly NFIELDS comma-separated fields. */
static int split(const char *line, size_t n, field_t *f) {
  unsigned k = 0;
  for (size_t start = 0;;) {
    const char *comma = memchr(line + start, ',', n - start);
    size_t end = comma ? (size_t)(comma - line) : n;
    if (k == NFIELDS) return -1;
    f[k++] = (field_t){line + start, end - start};
    if (!comma) break;
    start = end + 1;
  }
  return k == NFIELDS ? 0 : -1;
}

typedef struct {
  ca_trace_t *out;
  ca_import_error_t *err;
  size_t line;
  uint64_t t0;
  bool have_t0;
} csv_t;

static int bad(csv_t *c, const char *what, field_t f) {
  return ca_import_fail(c->err, "rmm csv: line %zu: %s: '%.*s'", c->line, what, (int)(f.n > 60 ? 60 : f.n), f.p);
}

static int push(csv_t *c, ca_trace_kind_t kind, const ca_trace_event_t *base) {
  ca_trace_event_t e = *base;
  e.kind = (uint16_t)kind;
  return ca_trace_push(c->out, &e) ? 0 : ca_import_fail(c->err, "rmm csv: line %zu: out of memory", c->line);
}

static int row(csv_t *c, const char *line, size_t n) {
  field_t f[NFIELDS];
  if (split(line, n, f))
    return ca_import_fail(c->err, "rmm csv: line %zu: expected %d comma-separated fields "
                                  "(Thread,Time,Action,Pointer,Size,Stream)", c->line, NFIELDS);
  uint64_t thread, ns, addr, size, stream;
  if (!parse_u64(f[0], &thread)) return bad(c, "the thread is not an integer", f[0]);
  if (!parse_time(f[1], &ns)) return bad(c, "the time is neither seconds nor H:M:S:us", f[1]);
  if (!parse_u64(f[3], &addr)) return bad(c, "the pointer is not an integer", f[3]);
  if (!parse_u64(f[4], &size)) return bad(c, "the size is not an integer", f[4]);
  if (!parse_u64(f[5], &stream)) return bad(c, "the stream is not an integer", f[5]);
  if (!c->have_t0) c->t0 = ns, c->have_t0 = true;
  ca_trace_event_t e = {.time_ns = ns >= c->t0 ? ns - c->t0 : 0, .addr = addr, .size = size, .stream = stream,
                  .thread = (uint32_t)(thread ^ thread >> 32)};
  if (field_is(f[2], "allocate")) return push(c, CA_EV_ALLOC, &e);
  if (field_is(f[2], "allocate failure")) return push(c, CA_EV_OOM, &e);
  if (field_is(f[2], "free") || field_is(f[2], "deallocate"))
    return push(c, CA_EV_FREE_ASYNC, &e) || push(c, CA_EV_FREE_COMPLETED, &e) ? -1 : 0;
  return bad(c, "unknown action (allocate, free, deallocate, allocate failure)", f[2]);
}

int ca_import_rmm_csv(const uint8_t *data, size_t n, ca_trace_t *out, ca_import_error_t *err) {
  csv_t c = {.out = out, .err = err};
  const char *s = (const char *)data;
  out->format = "rmm-csv";
  for (size_t pos = 0; pos < n;) {
    const char *nl = memchr(s + pos, '\n', n - pos);
    size_t len = (nl ? (size_t)(nl - s) : n) - pos;
    const char *line = s + pos;
    pos += len + 1;
    c.line++;
    if (len && line[len - 1] == '\r') len--;
    if (memchr(line, 0, len)) return ca_import_fail(err, "rmm csv: line %zu: a NUL byte", c.line);
    if (c.line == 1) {
      if (!field_is((field_t){line, len}, "Thread,Time,Action,Pointer,Size,Stream"))
        return ca_import_fail(err, "rmm csv: line 1: expected the header Thread,Time,Action,Pointer,Size,Stream");
      continue;
    }
    if (len == 0) continue;   /* a blank line, as at the end of a file */
    if (row(&c, line, len)) return -1;
  }
  if (c.line == 0) return ca_import_fail(err, "rmm csv: line 1: the file is empty");
  return 0;
}
