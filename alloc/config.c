/* CUDALLOC_CONF parsing: one table of keys, one parser, no allocation.
 *
 * Tokens are (pointer, length) views into the configuration string, and
 * numbers are parsed from small stack copies, so a hostile string can cost
 * a warning but never memory or a crash. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "rank.h"

ca_config_t ca_config __attribute__((aligned(CA_LINE)));

/* How a value is read and stored. Every rule of a key (its range, its unit,
 * the width of its field, whether it must be a power of two) is in its row
 * of the table, so that a new key is one row. */
typedef enum {
  KEY_BOOL,      /* bool */
  KEY_CHOICE,    /* index among `choices`, into an unsigned of `size` bytes */
  KEY_UINT,      /* an integer, into an unsigned of `size` bytes */
  KEY_BYTES,     /* an integer times `unit`, into a uint64_t */
  KEY_DOUBLE,    /* double */
  KEY_STRING,    /* a string of fewer than `size` characters */
  KEY_FAULTS,    /* <op>@<k>, repeatable: ca_backend_options_t's fail list */
  KEY_LATENCY,   /* <op>@<us>, repeatable: ca_backend_options_t's latency_us */
  KEY_SIGNAL,    /* a signal a program may give cudalloc (name or number), into an int; 0 off */
  KEY_PROCESS,   /* <pid>:<name>:<bytes>, repeatable: ca_backend_options_t's others */
} key_kind_t;

enum {
  F_POW2 = 1,        /* a power of two (0 allowed where min is 0) */
  F_HOST_PAGES = 2,  /* a multiple of the host page size */
  F_BACKEND = 4,     /* a backend name ca_backend_find() knows */
};

typedef struct key_s {
  const char *name;
  key_kind_t kind;
  size_t offset, size;    /* of the field in ca_config_t */
  double min, max;        /* accepted range of numbers (in the key's unit) */
  uint64_t unit;          /* KEY_BYTES: bytes per unit */
  unsigned flags;
  const char *choices;    /* KEY_CHOICE: "a|b|c", index = stored value */
  const char *doc;
} conf_key_t;

#define FIELD(f) offsetof(ca_config_t, f), sizeof(((ca_config_t *)0)->f)
#define CA_STR_(x) #x
#define CA_STR(x) CA_STR_(x)
#define U64_MAX_D 18446744073709551615.0

static const conf_key_t keys[] = {
  {"backend", KEY_STRING, FIELD(backend), 0, 0, 0, F_BACKEND, "cuda|sim",
   "device backend: the CUDA driver, or the simulated device"},
  {"expandable_segments", KEY_BOOL, FIELD(expandable_segments), 0, 1, 0, 0, NULL,
   "one growable virtual range per device (true) or classic fixed segments (false)"},
  {"max_split_size_mb", KEY_BYTES, FIELD(max_split_size), 1, 1 << 30, 1 << 20, 0, NULL,
   "classic segments: blocks larger than this are never split"},
  {"garbage_collection_threshold", KEY_DOUBLE, FIELD(gc_threshold), 0, 1, 0, 0, NULL,
   "give cached pages back once reserved memory exceeds this fraction of the allowed memory"},
  {"roundup_power2_divisions", KEY_UINT, FIELD(roundup_power2_divisions), 0, 64, 0, F_POW2, NULL,
   "round sizes up to one of N steps between powers of two (a power of two, 0 = off)"},
  {"memory_cap_mb", KEY_BYTES, FIELD(memory_cap), 0, 1 << 30, 1 << 20, 0, NULL,
   "per-process cap on reserved memory per device (0 = none)"},
  {"memory_fraction", KEY_DOUBLE, FIELD(memory_fraction), 0, 1, 0, 0, NULL,
   "per-process cap as a fraction of device memory (0 = none)"},
  {"wait_before_growing", KEY_BOOL, FIELD(wait_before_growing), 0, 1, 0, 0, NULL,
   "expandable segments: before a growth past 2% over allocated memory, wait for pending frees worth more than "
   "half of that and 20 MiB (true), or grow at once (false)"},
  {"page_churn_cap", KEY_DOUBLE, FIELD(page_churn_cap), 0, 16, 0, 0, NULL,
   "expandable segments: a page that growths keep moving out of a free block and back stays where it is, the "
   "growth creating a page instead, while reserved memory stays within this fraction above peak allocated memory "
   "(0: pages always move, the least memory and a driver call per move)"},
  {"free_mode", KEY_CHOICE, FIELD(free_mode), 0, 0, 0, 0, "device|stream",
   "cudaFree waits for all device work (device), or only for its stream (stream)"},
  {"torch_free", KEY_CHOICE, FIELD(torch_free), 0, 0, 0, 0, "device|stream",
   "PyTorch's pluggable free waits for all device work (device), or reuses the block at once on its stream (stream)"},
  {"legacy_queue", KEY_CHOICE, FIELD(legacy_queue), 0, 0, 0, 0, "auto|off|on",
   "while the program has used no stream but the legacy one (and one thread), cudaFree'd blocks are reused by it "
   "with no event, until a stream, a second thread or a peer device appears: where the shim sees every stream "
   "creation (auto), or also linked as a library whose program registers its streams (on); or never (off)"},
  {"track", KEY_CHOICE, FIELD(track), 0, 0, 0, 0, "off|caller|stack|python|backtrace",
   "call site of every live block: none, return address, stack, stack + Python frames, stack unwound every time"},
  {"track_depth", KEY_UINT, FIELD(track_depth), 1, 64, 0, 0, NULL,
   "program frames kept with track:stack, python and backtrace"},
  {"leak_exit_code", KEY_UINT, FIELD(leak_exit_code), 0, 255, 0, 0, NULL,
   "exit status when blocks are still allocated at exit (0: the program's own)"},
  {"thread_cache_kb", KEY_UINT, FIELD(thread_cache_kb), 0, 1 << 20, 0, 0, NULL,
   "bytes (KiB) each thread may hold of small blocks it freed on a stream, reused by that thread on that stream without the device lock (0 = off)"},
  {"thread_cache_streams", KEY_UINT, FIELD(thread_cache_streams), 1, 128, 0, 0, NULL,
   "how many of a thread's streams with cached small blocks each add thread_cache_kb to what it may hold (1 = thread_cache_kb in all)"},
  {"thread_cache_large_mb", KEY_UINT, FIELD(thread_cache_large_mb), 0, 1 << 20, 0, 0, NULL,
   "bytes (MiB) each thread may hold of blocks above 64 KiB and up to 8 MiB that it freed on a stream, in the same cache (0 = off)"},
  {"arenas", KEY_UINT, FIELD(arenas), 1, CA_MAX_ARENAS, 0, 0, NULL,
   "arenas per device, each with its own lock, pools and queues (arena_spread says which one a thread's "
   "allocation goes to); the device's cap covers them all (1 = one arena)"},
  {"arena_spread", KEY_CHOICE, FIELD(arena_spread), 0, 0, 0, 0, "contended|first",
   "with arenas above 1: a thread allocates from the first arena until its takes of the device lock keep finding "
   "it held, then moves to the next arena in turn, all its streams with it (contended); or every (thread, stream) "
   "round-robin over them from its first allocation (first)"},
  {"quiet", KEY_BOOL, FIELD(quiet), 0, 1, 0, 0, NULL,
   "no summary on stderr at exit"},
  {"summary", KEY_CHOICE, FIELD(summary), 0, 0, 0, 0, "all|rank0",
   "which processes of a job print the summary on stderr: every one, or rank 0 only (and a process with no rank)"},
  {"report", KEY_STRING, FIELD(report), 0, 0, 0, 0, NULL,
   "path prefix of the report files (%p = pid, %r = rank, %h = host name); empty = none"},
  {"report_signal", KEY_SIGNAL, FIELD(report_signal), 0, 0, 0, 0, NULL,
   "on this signal (SIGUSR1, SIGUSR2 or a real-time signal's number) the next allocator call prints the "
   "statistics table and writes the report files; off = none"},
  {"pinned_cache_mb", KEY_BYTES, FIELD(pinned_cache), 0, 1 << 30, 1 << 20, 0, NULL,
   "free pinned host memory kept for reuse; whole free chunks beyond it are given back"},
  {"pinned_via", KEY_CHOICE, FIELD(sim.host_register), 0, 0, 0, 0, "alloc|register",
   "CUDA: pin chunks with cuMemHostAlloc (alloc) or mmap + cuMemHostRegister (register)"},
  {"oom_report", KEY_STRING, FIELD(oom_report), 0, 0, 0, 0, NULL,
   "path prefix of the out-of-memory reports (.txt, .json; %p = pid, %r = rank); empty = <report>-oom, "
   "else $TMPDIR/cudalloc-oom-%p; off = stderr only"},
  {"trace", KEY_STRING, FIELD(trace), 0, 0, 0, 0, NULL,
   "event log of every allocation, free and mapping (%p = pid, %r = rank, %h = host; docs/trace.md); empty = none"},
  {"trace_ring", KEY_UINT, FIELD(trace_ring), 0, 1e9, 0, 0, NULL,
   "with trace: keep only the last N events, written at exit, on out-of-memory and by cudalloc_trace_dump (0 = every event)"},
  {"step_on", KEY_CHOICE, FIELD(step_on), 0, 0, 0, 0, "api|sync",
   "what ends a training step for the creep report: cudalloc_step() only (api), or also each cudaDeviceSynchronize (sync)"},
  {"sample_ms", KEY_UINT, FIELD(sample_ms), 0, 3600000, 0, 0, NULL,
   "end a step every N ms, checked at allocations and frees, for programs that mark none (0 = off)"},
  {"creep_csv", KEY_STRING, FIELD(creep_csv), 0, 0, 0, 0, NULL,
   "per-step CSV of allocated, reserved, pending and the top call sites' live bytes (%p, %r); empty = none"},
  {"creep_svg", KEY_STRING, FIELD(creep_svg), 0, 0, 0, 0, NULL,
   "per-step SVG curve of allocated, reserved and pending, with the device size and the cap (%p, %r); empty = none"},
  {"sim_devices", KEY_UINT, FIELD(sim.devices), 1, 16, 0, 0, NULL,
   "number of simulated devices"},
  {"sim_capacity_mb", KEY_BYTES, FIELD(sim.capacity), 1, 1 << 20, 1 << 20, 0, NULL,
   "physical memory of each simulated device"},
  {"sim_granularity_kb", KEY_BYTES, FIELD(sim.granularity), 4, 1 << 20, 1 << 10, F_POW2 | F_HOST_PAGES, NULL,
   "page size of the simulated device"},
  {"sim_events", KEY_CHOICE, FIELD(sim.events), 0, 0, 0, 0, "auto|manual|lag",
   "simulated work completes at once (auto), when a test says (manual), or some calls later (lag)"},
  {"sim_lag_ops", KEY_UINT, FIELD(sim.lag_ops), 1, 1000000, 0, 0, NULL,
   "sim_events:lag: work completes by itself after 1 to this many later calls (seeded by sim_seed)"},
  {"sim_no_vmm", KEY_BOOL, FIELD(sim.no_vmm), 0, 1, 0, 0, NULL,
   "the simulated devices say they lack virtual memory management (cudalloc then passes them through)"},
  {"sim_fail", KEY_FAULTS, FIELD(sim.fail), 1, 1e15, 0, 0, NULL,
   "<op>@<k>: the k-th call of op fails (repeatable, at most " CA_STR(CA_BACKEND_MAX_FAULTS) ")"},
  {"sim_fail_rate", KEY_DOUBLE, FIELD(sim.fail_rate), 0, 1, 0, 0, NULL,
   "every simulated call fails with this probability"},
  {"sim_seed", KEY_UINT, FIELD(sim.seed), 0, U64_MAX_D, 0, 0, NULL,
   "seed of sim_fail_rate's and sim_events:lag's generators"},
  {"sim_pinned_mb", KEY_BYTES, FIELD(sim.pinned_capacity), 1, 1 << 20, 1 << 20, 0, NULL,
   "pinned host memory the simulated machine allows"},
  {"sim_latency", KEY_LATENCY, FIELD(sim.latency_us), 0, 10000000, 0, 0, NULL,
   "<op>@<us>: every call of op takes this long (repeatable)"},
  {"sim_other_process", KEY_PROCESS, FIELD(sim.others), 1, 4294967295.0, 0, 0, NULL,
   "<pid>:<name>:<bytes>: another process holds that much of every simulated device (repeatable, at most "
   CA_STR(CA_BACKEND_MAX_OTHERS) ")"},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* Values that PyTorch's PYTORCH_CUDA_ALLOC_CONF gives a key that cudalloc
 * also has, with another meaning: refused with a warning that says both. */
static const struct foreign_value_s {
  const char *key, *values, *meaning;
} foreign_values[] = {
  {"backend", "native|cudaMallocAsync",
   "is PyTorch's choice of its own allocator; in cudalloc, backend is the device cudalloc allocates from"},
};

/* PyTorch's keys that cudalloc has too, with the same name and meaning. */
static const char *const pytorch_shared_keys[] = {
  "expandable_segments", "max_split_size_mb", "garbage_collection_threshold", "roundup_power2_divisions",
};

void ca_config_defaults(ca_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  strcpy(cfg->backend, "cuda");
  cfg->expandable_segments = true;
  cfg->wait_before_growing = true;
  cfg->page_churn_cap = 0.5;
  cfg->max_split_size = UINT64_MAX;
  cfg->free_mode = CA_FREE_DEVICE;
  cfg->torch_free = CA_FREE_DEVICE;
  cfg->track = CA_TRACK_STACK;
  cfg->track_depth = 6;
  cfg->thread_cache_kb = 1024;
  cfg->thread_cache_large_mb = 0;
  cfg->thread_cache_streams = 64;
  /* Two: threads that contend each get one (two GPU-like threads scaled as
   * jemalloc's did in the same runs, 1.2 to 2.2x one as the machine gave,
   * against 0.2 to 0.55 on one arena), and a program whose threads do not
   * contend stays on the first (arena_spread:contended); exact ordinal
   * peaks (arena.h's leases) made it the default (docs/benchmarks.md). */
  cfg->arenas = 2;
  cfg->arena_spread = CA_SPREAD_CONTENDED;
#ifdef CA_TESTING
  /* The test build's whole suite with arenas forced (CUDALLOC_TEST_ARENAS=2
   * make test): a default, so that a test's own arenas:N still wins. */
  const char *forced = ca_getenv("CUDALLOC_TEST_ARENAS");
  if (forced && *forced >= '1' && *forced <= '0' + CA_MAX_ARENAS && !forced[1]) cfg->arenas = (unsigned)(*forced - '0');
#endif
  cfg->sim.devices = 1;
  cfg->sim.capacity = 1024ull << 20;
  cfg->sim.granularity = 2ull << 20;
  cfg->sim.seed = 1;
  cfg->sim.lag_ops = 8;
  cfg->sim.pinned_capacity = 1024ull << 20;
  cfg->pinned_cache = 1024ull << 20;
}

// ----------------------------------------------------------------------------
// Small parsers over (pointer, length) views
// ----------------------------------------------------------------------------

typedef struct { const char *p; size_t n; } view_t;

static bool view_eq(view_t v, const char *s) {
  size_t n = strlen(s);
  if (n != v.n) return false;
  for (size_t i = 0; i < n; i++)
    if (tolower((unsigned char)v.p[i]) != tolower((unsigned char)s[i])) return false;
  return true;
}

static view_t view_trim(view_t v) {
  while (v.n && isspace((unsigned char)v.p[0])) { v.p++; v.n--; }
  while (v.n && isspace((unsigned char)v.p[v.n - 1])) v.n--;
  return v;
}

/* Copies v into a NUL-terminated buffer; false when it does not fit. */
static bool view_copy(view_t v, char *buf, size_t cap) {
  if (v.n + 1 > cap) return false;
  memcpy(buf, v.p, v.n);
  buf[v.n] = 0;
  return true;
}

static bool parse_u64(view_t v, uint64_t *out) {
  char buf[32];
  if (v.n == 0 || !view_copy(v, buf, sizeof buf)) return false;
  if (!isdigit((unsigned char)buf[0])) return false;
  errno = 0;
  char *end;
  unsigned long long x = strtoull(buf, &end, 10);
  if (errno || *end) return false;
  *out = x;
  return true;
}

/* The documented forms only, [0-9]+ and [0-9]*.[0-9]+: strtod alone would
 * also take a sign, an exponent, hexadecimal and "inf". */
static bool plain_decimal(view_t v) {
  size_t i = 0, digits_after = 0;
  while (i < v.n && isdigit((unsigned char)v.p[i])) i++;
  if (i < v.n && v.p[i] == '.')
    for (i++; i < v.n && isdigit((unsigned char)v.p[i]); i++) digits_after++;
  return i == v.n && v.n > 0 && (digits_after > 0 || !memchr(v.p, '.', v.n));
}

static bool parse_double(view_t v, double *out) {
  char buf[32];
  if (!plain_decimal(v) || !view_copy(v, buf, sizeof buf)) return false;
  errno = 0;
  char *end;
  double x = strtod(buf, &end);
  if (errno || *end || !isfinite(x)) return false;
  *out = x;
  return true;
}

static bool parse_bool(view_t v, bool *out) {
  static const char *yes[] = {"true", "1", "on", "yes"}, *no[] = {"false", "0", "off", "no"};
  for (int i = 0; i < 4; i++) {
    if (view_eq(v, yes[i])) { *out = true; return true; }
    if (view_eq(v, no[i])) { *out = false; return true; }
  }
  return false;
}

/* Index of v among "a|b|c", or -1. */
static int parse_choice(view_t v, const char *choices) {
  int idx = 0;
  for (const char *c = choices; *c; idx++) {
    const char *bar = strchr(c, '|');
    size_t n = bar ? (size_t)(bar - c) : strlen(c);
    if (n == v.n && strncasecmp(c, v.p, n) == 0) return idx;
    c += n + (bar ? 1 : 0);
  }
  return -1;
}

// ----------------------------------------------------------------------------
// Applying one key
// ----------------------------------------------------------------------------

/* "a|b|c" of every backend operation, for the warnings of sim_fail and sim_latency. */
static void op_choices(char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (int op = 0; op < CA_OP_COUNT && n < cap; op++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%s", op ? "|" : "", ca_backend_op_name(op));
}

static void expected(const conf_key_t *k, char *buf, size_t cap) {
  char ops[320];
  const char *rule = (k->flags & F_HOST_PAGES) ? ", a power of two and a multiple of the host page size"
                     : (k->flags & F_POW2)     ? ", a power of two"
                                               : "";
  switch (k->kind) {
  case KEY_BOOL: snprintf(buf, cap, "true or false"); break;
  case KEY_CHOICE: snprintf(buf, cap, "one of %s", k->choices); break;
  case KEY_UINT: case KEY_BYTES:
    if (k->max >= U64_MAX_D) snprintf(buf, cap, "an integer from %.0f to %llu", k->min, ~0ull);
    else snprintf(buf, cap, "an integer from %.0f to %.0f%s", k->min, k->max, rule);
    break;
  case KEY_DOUBLE: snprintf(buf, cap, "a decimal number from %g to %g", k->min, k->max); break;
  case KEY_STRING:
    if (k->flags & F_BACKEND) snprintf(buf, cap, "one of %s", k->choices);
    else snprintf(buf, cap, "a path of fewer than %zu characters", k->size);
    break;
  case KEY_SIGNAL:
    snprintf(buf, cap, "SIGUSR1, SIGUSR2, a number among %d, %d and %d to %d (real-time signals), or off", SIGUSR1,
             SIGUSR2, SIGRTMIN, SIGRTMAX);
    break;
  case KEY_PROCESS:
    snprintf(buf, cap, "<pid from 1 to %.0f>:<name of 1 to %d characters, no ':' or ','>:<bytes>"
                       " (at most " CA_STR(CA_BACKEND_MAX_OTHERS) " entries)", k->max, CA_PROCESS_NAME_MAX - 1);
    break;
  case KEY_FAULTS: case KEY_LATENCY:
    op_choices(ops, sizeof ops);
    snprintf(buf, cap, "<op>@<integer from %.0f to %.0f>%s, op one of %s", k->min, k->max,
             k->kind == KEY_FAULTS ? " (at most " CA_STR(CA_BACKEND_MAX_FAULTS) " entries)" : "", ops);
    break;
  }
}

static bool in_range(const conf_key_t *k, double x) { return x >= k->min && x <= k->max; }

static bool follows_rules(const conf_key_t *k, uint64_t n) {
  if ((k->flags & F_POW2) && (n & (n - 1))) return false;
  if ((k->flags & F_HOST_PAGES) && n % (uint64_t)sysconf(_SC_PAGESIZE)) return false;
  return true;
}

/* Stores n into an unsigned field of k->size bytes; false when it does not fit. */
static bool store_uint(void *field, size_t size, uint64_t n) {
  switch (size) {
  case 1: if (n > UINT8_MAX) return false; *(uint8_t *)field = (uint8_t)n; return true;
  case 4: if (n > UINT32_MAX) return false; *(uint32_t *)field = (uint32_t)n; return true;
  case 8: *(uint64_t *)field = n; return true;
  default: return false;
  }
}

static uint64_t load_uint(const void *field, size_t size) {
  switch (size) {
  case 1: return *(const uint8_t *)field;
  case 4: return *(const uint32_t *)field;
  default: return *(const uint64_t *)field;
  }
}

static bool apply_op_item(ca_config_t *cfg, const conf_key_t *k, view_t v) {
  const char *at = memchr(v.p, '@', v.n);
  if (!at) return false;
  int op = ca_backend_op_from_name(v.p, (size_t)(at - v.p));
  uint64_t n;
  view_t num = {at + 1, v.n - (size_t)(at + 1 - v.p)};
  if (op < 0 || !parse_u64(num, &n) || !in_range(k, (double)n)) return false;
  if (k->kind == KEY_LATENCY) {
    cfg->sim.latency_us[op] = (unsigned)n;
    return true;
  }
  if (cfg->sim.fail_count >= CA_BACKEND_MAX_FAULTS) return false;
  cfg->sim.fail[cfg->sim.fail_count++] = (ca_fault_spec_t){(ca_backend_op_t)op, n};
  return true;
}

/* <pid>:<name>:<bytes>; the name is what /proc/PID/comm would say. */
static bool apply_process(ca_config_t *cfg, const conf_key_t *k, view_t v) {
  const char *c1 = memchr(v.p, ':', v.n);
  const char *c2 = c1 ? memchr(c1 + 1, ':', v.n - (size_t)(c1 + 1 - v.p)) : NULL;
  if (!c2 || cfg->sim.others_count >= CA_BACKEND_MAX_OTHERS) return false;
  view_t pid = {v.p, (size_t)(c1 - v.p)}, name = {c1 + 1, (size_t)(c2 - c1 - 1)};
  view_t bytes = {c2 + 1, v.n - (size_t)(c2 + 1 - v.p)};
  uint64_t p, b;
  if (!parse_u64(pid, &p) || !in_range(k, (double)p) || !parse_u64(bytes, &b)) return false;
  if (name.n == 0 || name.n >= CA_PROCESS_NAME_MAX || memchr(name.p, ':', name.n)) return false;
  for (size_t i = 0; i < name.n; i++)
    if (iscntrl((unsigned char)name.p[i]) || name.p[i] == '"' || name.p[i] == '\\') return false;
  ca_process_t *o = &cfg->sim.others[cfg->sim.others_count++];
  memset(o, 0, sizeof *o);
  o->pid = (uint32_t)p;
  o->bytes = b;
  memcpy(o->name, name.p, name.n);
  return true;
}

static bool apply_string(const conf_key_t *k, char *field, view_t v) {
  char buf[CA_CONFIG_PATH_MAX];
  if (!view_copy(v, buf, k->size < sizeof buf ? k->size : sizeof buf)) return false;
  if (k->flags & F_BACKEND) {   /* names in any case, as the other choices */
    for (char *c = buf; *c; c++) *c = (char)tolower((unsigned char)*c);
    if (!ca_backend_find(buf)) return false;
  }
  memcpy(field, buf, v.n + 1);
  return true;
}

/* Only signals whose default action a program would not miss: the user
 * signals and the real-time ones (never SIGINT, SIGTERM, SIGSEGV...: the
 * handler only sets a flag, so the process would no longer stop on them). */
static bool signal_allowed(uint64_t n) {
  return n == SIGUSR1 || n == SIGUSR2 || (n >= (uint64_t)SIGRTMIN && n <= (uint64_t)SIGRTMAX);
}

static bool apply_signal(int *field, view_t v) {
  static const struct { const char *name; int sig; } names[] = {
    {"off", 0}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
  };
  uint64_t n;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (view_eq(v, names[i].name)) return *field = names[i].sig, true;
  if (!parse_u64(v, &n) || (n && !signal_allowed(n))) return false;
  *field = (int)n;
  return true;
}

static bool apply(ca_config_t *cfg, const conf_key_t *k, view_t v) {
  char *field = (char *)cfg + k->offset;
  uint64_t n;
  if (v.n == 0) return false;
  switch (k->kind) {
  case KEY_BOOL: return parse_bool(v, (bool *)field);
  case KEY_CHOICE: {
    int idx = parse_choice(v, k->choices);
    return idx >= 0 && store_uint(field, k->size, (uint64_t)idx);
  }
  case KEY_UINT:
    return parse_u64(v, &n) && in_range(k, (double)n) && follows_rules(k, n) && store_uint(field, k->size, n);
  case KEY_BYTES:
    if (!parse_u64(v, &n) || !in_range(k, (double)n)) return false;
    n *= k->unit;
    return follows_rules(k, n) && store_uint(field, k->size, n);
  case KEY_DOUBLE: {
    double x;
    if (!parse_double(v, &x) || !in_range(k, x)) return false;
    *(double *)field = x;
    return true;
  }
  case KEY_STRING: return apply_string(k, field, v);
  case KEY_FAULTS: case KEY_LATENCY: return apply_op_item(cfg, k, v);
  case KEY_SIGNAL: return apply_signal((int *)field, v);
  case KEY_PROCESS: return apply_process(cfg, k, v);
  }
  return false;
}

// ----------------------------------------------------------------------------
// The parser
// ----------------------------------------------------------------------------

/* Writes at most 64 characters of v, control characters as '?', so that a
 * warning stays one line whatever the string holds. */
static void put_view(FILE *out, view_t v) {
  for (size_t i = 0; i < v.n && i < 64; i++)
    fputc(iscntrl((unsigned char)v.p[i]) ? '?' : v.p[i], out);
  if (v.n > 64) fputs("...", out);
}

static void warn_unknown(FILE *out, view_t key) {
  if (!out) return;
  fputs("cudalloc: CUDALLOC_CONF: unknown key '", out);
  put_view(out, key);
  fputs("'; valid keys:", out);
  for (size_t i = 0; i < NKEYS; i++) fprintf(out, "%s %s", i ? "," : "", keys[i].name);
  fputs(" (CUDALLOC_CONF=help describes them)\n", out);
}

static const struct foreign_value_s *foreign_value(const conf_key_t *k, view_t v) {
  for (size_t i = 0; i < sizeof foreign_values / sizeof *foreign_values; i++)
    if (strcmp(foreign_values[i].key, k->name) == 0 && parse_choice(v, foreign_values[i].values) >= 0)
      return &foreign_values[i];
  return NULL;
}

static void warn_value(FILE *out, const conf_key_t *k, view_t v, const char *why) {
  if (!out) return;
  char exp[512];
  expected(k, exp, sizeof exp);
  const struct foreign_value_s *f = foreign_value(k, v);
  if (f) {
    fprintf(out, "cudalloc: CUDALLOC_CONF: '%s:", k->name);
    put_view(out, v);
    fprintf(out, "' %s (expected %s); keeping the default\n", f->meaning, exp);
    return;
  }
  fprintf(out, "cudalloc: CUDALLOC_CONF: %s '", why);
  put_view(out, v);
  fprintf(out, "' for key '%s' (expected %s); keeping the default\n", k->name, exp);
}

static void print_help(FILE *out) {
  if (!out) return;
  ca_config_t defaults;
  ca_config_defaults(&defaults);
  fputs("cudalloc: CUDALLOC_CONF=key:value,key:value; every key, its default and its meaning:\n", out);
  ca_config_print(&defaults, out);
}

static void warn_missing(FILE *out, const conf_key_t *k) {
  if (!out) return;
  char exp[512];
  expected(k, exp, sizeof exp);
  fprintf(out, "cudalloc: CUDALLOC_CONF: missing ':value' for key '%s' (expected %s); keeping the default\n",
          k->name, exp);
}

static int parse_item(ca_config_t *cfg, view_t item, FILE *out) {
  item = view_trim(item);
  if (item.n == 0) return 0;                       /* tolerate "a:b,,c:d" and a trailing comma */
  const char *colon = memchr(item.p, ':', item.n);
  view_t key = view_trim((view_t){item.p, colon ? (size_t)(colon - item.p) : item.n});
  if (view_eq(key, "help")) {   /* not a setting: the program goes on with the others */
    print_help(out);
    return 0;
  }
  for (size_t i = 0; i < NKEYS; i++) {
    if (!view_eq(key, keys[i].name)) continue;
    if (!colon) {
      warn_missing(out, &keys[i]);
      return 1;
    }
    view_t v = view_trim((view_t){colon + 1, item.n - (size_t)(colon + 1 - item.p)});
    ca_config_t trial = *cfg;                      /* a bad value leaves cfg untouched */
    if (!apply(&trial, &keys[i], v)) {
      warn_value(out, &keys[i], v, v.n ? "bad value" : "empty value");
      return 1;
    }
    *cfg = trial;
    return 0;
  }
  warn_unknown(out, key);
  return 1;
}

/* The comma that ends the item at p, or NULL. Commas inside [...] belong to
 * the value, so that PyTorch's list form (roundup_power2_divisions:[256:1,
 * 512:2]) is one item and costs one warning, not one per element. A '['
 * that nothing closes would swallow every later item: the item then ends at
 * its first comma, and *unbalanced says so. */
static const char *item_end(const char *p, bool *unbalanced) {
  int depth = 0;
  const char *first_comma = NULL;
  *unbalanced = false;
  for (; *p; p++) {
    if (*p == ',' && !first_comma) first_comma = p;
    if (*p == '[') depth++;
    else if (*p == ']' && depth > 0) depth--;
    else if (*p == ',' && depth == 0) return p;
  }
  *unbalanced = depth > 0 && first_comma;
  return *unbalanced ? first_comma : NULL;
}

static void warn_unbalanced(FILE *out, view_t item) {
  if (!out) return;
  fputs("cudalloc: CUDALLOC_CONF: unbalanced '[' in '", out);
  put_view(out, view_trim(item));
  fputs("'; the item ends at its first comma and is ignored\n", out);
}

int ca_config_parse(ca_config_t *cfg, const char *conf, FILE *out) {
  int problems = 0;
  if (!conf) return 0;
  for (const char *p = conf;;) {
    bool unbalanced;
    const char *comma = item_end(p, &unbalanced);
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    if (unbalanced) warn_unbalanced(out, (view_t){p, n});
    problems += unbalanced ? 1 : parse_item(cfg, (view_t){p, n}, out);
    if (!comma) break;
    p = comma + 1;
  }
  return problems;
}

int ca_config_load(const char *conf) {
  ca_config_defaults(&ca_config);
  ca_log_block_t b;   /* the warnings of one rank together, each line tagged */
  int problems = ca_config_parse(&ca_config, conf ? conf : ca_getenv("CUDALLOC_CONF"), ca_log_block_begin(&b));
  ca_log_block_end(&b);
  return problems;
}

// ----------------------------------------------------------------------------
// Printing: every key, and what differs from the defaults
// ----------------------------------------------------------------------------

/* A bounded string being appended to: never overflows, always terminated. */
typedef struct { char *p; size_t cap, n; } text_t;

static void put(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text_t *t, const char *fmt, ...) {
  if (t->n + 1 >= t->cap) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
  va_end(ap);
  if (m > 0) t->n = t->n + (size_t)m < t->cap ? t->n + (size_t)m : t->cap - 1;
}

/* The value of k in cfg. Repeatable keys: one "op@n" per entry, each
 * preceded by `each` ("" the first time, so "a@1 b@2" or "k:a@1,k:b@2"). */
static void format_value(const ca_config_t *cfg, const conf_key_t *k, text_t *t, const char *each) {
  const char *field = (const char *)cfg + k->offset;
  switch (k->kind) {
  case KEY_BOOL: put(t, "%s", *(const bool *)field ? "true" : "false"); break;
  case KEY_CHOICE: {
    uint64_t idx = load_uint(field, k->size);
    const char *c = k->choices;
    for (uint64_t i = 0; i < idx && c; i++) c = strchr(c, '|') + 1;
    put(t, "%.*s", (int)strcspn(c, "|"), c);
    break;
  }
  case KEY_UINT: put(t, "%llu", (unsigned long long)load_uint(field, k->size)); break;
  case KEY_BYTES: {
    uint64_t b = *(const uint64_t *)field;
    if (b == UINT64_MAX) put(t, "unlimited");
    else put(t, "%llu", (unsigned long long)(b / k->unit));
    break;
  }
  case KEY_DOUBLE: put(t, "%.15g", *(const double *)field); break;   /* reads back as written */
  case KEY_STRING: put(t, "%s", field); break;
  case KEY_SIGNAL: {
    int sig = *(const int *)field;
    if (sig == 0) put(t, "off");
    else if (sig == SIGUSR1 || sig == SIGUSR2) put(t, "SIGUSR%d", sig == SIGUSR1 ? 1 : 2);
    else put(t, "%d", sig);
    break;
  }
  case KEY_FAULTS:
    for (unsigned i = 0; i < cfg->sim.fail_count; i++)
      put(t, "%s%s@%llu", i ? each : "", ca_backend_op_name(cfg->sim.fail[i].op),
          (unsigned long long)cfg->sim.fail[i].nth);
    break;
  case KEY_PROCESS:
    for (unsigned i = 0; i < cfg->sim.others_count; i++)
      put(t, "%s%u:%s:%llu", i ? each : "", cfg->sim.others[i].pid, cfg->sim.others[i].name,
          (unsigned long long)cfg->sim.others[i].bytes);
    break;
  case KEY_LATENCY:
    for (int op = 0, first = 1; op < CA_OP_COUNT; op++)
      if (cfg->sim.latency_us[op]) {
        put(t, "%s%s@%u", first ? "" : each, ca_backend_op_name(op), cfg->sim.latency_us[op]);
        first = 0;
      }
    break;
  }
}

void ca_config_print(const ca_config_t *cfg, FILE *out) {
  for (size_t i = 0; i < NKEYS; i++) {
    char buf[1024];
    text_t t = {buf, sizeof buf, 0};
    buf[0] = 0;
    format_value(cfg, &keys[i], &t, " ");
    fprintf(out, "  %-30s %s\n  %-30s   %s\n", keys[i].name, buf, "", keys[i].doc);
  }
}

static bool differs(const ca_config_t *a, const ca_config_t *b, const conf_key_t *k) {
  const char *x = (const char *)a + k->offset, *y = (const char *)b + k->offset;
  switch (k->kind) {
  case KEY_STRING: return strcmp(x, y) != 0;
  case KEY_DOUBLE: return *(const double *)x != *(const double *)y;
  case KEY_FAULTS: return a->sim.fail_count != b->sim.fail_count || memcmp(x, y, k->size) != 0;
  case KEY_PROCESS: return a->sim.others_count != b->sim.others_count || memcmp(x, y, k->size) != 0;
  default: return memcmp(x, y, k->size) != 0;
  }
}

size_t ca_config_changed(const ca_config_t *cfg, char *buf, size_t cap) {
  ca_config_t defaults;
  ca_config_defaults(&defaults);
  text_t t = {buf, cap, 0};
  if (cap) buf[0] = 0;
  for (size_t i = 0; i < NKEYS; i++) {
    if (!differs(cfg, &defaults, &keys[i])) continue;
    char each[CA_CONFIG_NAME_MAX + 24];
    snprintf(each, sizeof each, ",%s:", keys[i].name);
    put(&t, "%s", each + (t.n == 0));   /* no comma before the first */
    format_value(cfg, &keys[i], &t, each);
  }
  return t.n;
}

// ----------------------------------------------------------------------------
// PyTorch's settings in a process cudalloc serves
// ----------------------------------------------------------------------------

static bool is_shared_with_pytorch(view_t key) {
  for (size_t i = 0; i < sizeof pytorch_shared_keys / sizeof *pytorch_shared_keys; i++)
    if (view_eq(key, pytorch_shared_keys[i])) return true;
  return false;
}

/* One line for PyTorch's variable `name` (value conf): which of its keys
 * cudalloc would honour under CUDALLOC_CONF. */
static void note_pytorch(FILE *out, const char *name, const char *conf) {
  char honoured[256], refused[256];
  text_t h = {honoured, sizeof honoured, 0}, r = {refused, sizeof refused, 0};
  honoured[0] = refused[0] = 0;
  for (const char *p = conf;;) {
    bool unbalanced;   /* such an item is refused by the parse below too */
    const char *comma = item_end(p, &unbalanced);
    view_t item = view_trim((view_t){p, comma ? (size_t)(comma - p) : strlen(p)});
    const char *colon = memchr(item.p, ':', item.n);
    view_t key = view_trim((view_t){item.p, colon ? (size_t)(colon - item.p) : item.n});
    if (key.n && is_shared_with_pytorch(key)) {
      ca_config_t scratch;
      ca_config_defaults(&scratch);
      text_t *to = parse_item(&scratch, item, NULL) == 0 ? &h : &r;
      put(to, "%s%.*s", to->n ? ", " : "", (int)key.n, key.p);
    }
    if (!comma) break;
    p = comma + 1;
  }
  fprintf(out, "cudalloc: %s is set, but cudalloc serves this process's device memory: PyTorch's own setting "
               "no longer applies; ",
          name);
  if (h.n) fprintf(out, "cudalloc would honour its keys %s under CUDALLOC_CONF (same names)", honoured);
  else fputs("none of its keys is one cudalloc would honour under CUDALLOC_CONF", out);
  if (r.n) fprintf(out, "; not with the values given there: %s", refused);
  fputc('\n', out);
}

void ca_config_note_pytorch_env(FILE *out) {
  static const char *const vars[] = {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *conf = ca_getenv(vars[i]);
    if (conf) note_pytorch(out, vars[i], conf);
  }
}

// ----------------------------------------------------------------------------
// Report paths
// ----------------------------------------------------------------------------


/* gethostname's answer, "unknown-host" when it has none; a '/' (which no
 * host name has, but the call does not promise it) would name a folder. */
static const char *host_name(char *buf, size_t cap) {
  if (gethostname(buf, cap - 1) != 0 || !buf[0]) snprintf(buf, cap, "unknown-host");
  buf[cap - 1] = 0;
  for (char *c = buf; *c; c++)
    if (*c == '/') *c = '_';
  return buf;
}

/* Writes the expansion into out; false when it does not fit in cap bytes. */
static bool expand(const char *tmpl, const char *suffix, char *out, size_t cap) {
  size_t n = 0;
  char tmp[256];
  ca_rank_t rank;
  ca_rank_get(&rank);
  for (const char *t = tmpl; *t; t++) {
    const char *piece = NULL;
    if (t[0] == '%' && t[1] == 'p') snprintf(tmp, sizeof tmp, "%ld", (long)getpid()), piece = tmp;
    else if (t[0] == '%' && t[1] == 'r') piece = rank.text ? rank.text : "0";
    else if (t[0] == '%' && t[1] == 'h') piece = host_name(tmp, sizeof tmp);
    if (piece) {
      size_t len = strlen(piece);
      if (n + len >= cap) return false;
      memcpy(out + n, piece, len);
      n += len;
      t++;
      continue;
    }
    if (n + 1 >= cap) return false;
    out[n++] = *t;
  }
  size_t len = strlen(suffix);
  if (n + len >= cap) return false;
  memcpy(out + n, suffix, len + 1);
  return true;
}

bool ca_config_expand_path(const char *tmpl, const char *suffix, char *out, size_t cap) {
  if (expand(tmpl, suffix, out, cap)) return true;
  if (cap) out[0] = 0;    /* never a truncated path that names another file */
  return false;
}
