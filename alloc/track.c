/* Call sites of live blocks, as deep as `track` asks: nothing, the return
 * address of the allocating call, the program's stack above it (the
 * default: `track_depth` frames, from the cached unwinder of stackwalk.c),
 * the same with the Python frames of a thread that holds the GIL, or the
 * stack unwound afresh on every allocation (the slow reference).
 *
 * A site is one pointer: with track:caller the return address itself,
 * else an interned stack (identical stacks are stored once, so equal
 * pointers mean equal stacks in every mode). Sites are named
 * (symbolize.c: function, file:line, inlined chain) only when a report is
 * written. */
#include "track.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "symbolize.h"
#include "stackwalk.h"

#define BUCKETS 4096

/* frames[0..depth) are program addresses, innermost first; then py
 * Python frames (ca_pyframe_t pointers), innermost first. */
struct ca_stack_s {
  ca_stack_t *next;
  uint64_t hash;
  uint16_t depth, py;
  void *frames[];
};

static pthread_mutex_t stacks_lock = PTHREAD_MUTEX_INITIALIZER;
static ca_stack_t *buckets[BUCKETS];

static uint64_t hash_words(void *const *w, int n, uint64_t h) {
  for (int i = 0; i < n; i++) h = (h ^ (uint64_t)(uintptr_t)w[i]) * 0x100000001b3ull;
  return h;
}

/* The one stored copy of frames[0..n) followed by py[0..npy). */
static ca_stack_t *intern_both(void *const *frames, int n, void *const *py, int npy) {
  uint64_t h = hash_words(py, npy, hash_words(frames, n, 0xcbf29ce484222325ull ^ (uint64_t)npy));
  ca_stack_t **head = &buckets[h % BUCKETS];
  size_t cn = (size_t)n * sizeof *frames, pn = (size_t)npy * sizeof *py;
  pthread_mutex_lock(&stacks_lock);
  ca_stack_t *s = *head;
  while (s && !(s->hash == h && s->depth == n && s->py == npy && !memcmp(s->frames, frames, cn) &&
                (!pn || !memcmp(s->frames + n, py, pn))))
    s = s->next;
  if (!s && (s = malloc(sizeof *s + cn + pn))) {
    s->hash = h;
    s->depth = (uint16_t)n;
    s->py = (uint16_t)npy;
    memcpy(s->frames, frames, cn);
    if (pn) memcpy(s->frames + n, py, pn);   /* py may be NULL when npy is 0 */
    s->next = *head;
    *head = s;
  }
  pthread_mutex_unlock(&stacks_lock);
  return s;
}

void *ca_track_intern(void *const *frames, int n) { return intern_both(frames, n, NULL, 0); }

void *ca_track_site_slow(void *caller) {
  int depth = (int)ca_config.track_depth;
  if (!caller) return NULL;   /* an internal caller that names no program address */
  switch (ca_config.track) {
  case CA_TRACK_OFF: return NULL;
  case CA_TRACK_CALLER: return caller;
  case CA_TRACK_BACKTRACE: return ca_stackwalk_site(caller, depth, false, ca_track_intern);
  case CA_TRACK_PYTHON: {
    ca_stack_t *c = ca_stackwalk_site(caller, depth, true, ca_track_intern);
    const ca_pyframe_t *py[CA_PY_MAX_FRAMES];
    int npy = c ? ca_py_stack(py, CA_PY_MAX_FRAMES) : 0;
    return npy ? intern_both(c->frames, c->depth, (void *const *)py, npy) : c;
  }
  default: return ca_stackwalk_site(caller, depth, true, ca_track_intern);
  }
}

int ca_track_frames(const void *site, void *const **frames) {
  *frames = NULL;   /* set for no site too: under LTO the compiler follows a caller's loop this far */
  if (!site) return 0;
  if (ca_config.track == CA_TRACK_CALLER) {
    static __thread void *one;
    one = (void *)site;
    *frames = &one;
    return 1;
  }
  const ca_stack_t *s = site;
  *frames = s->frames;
  return s->depth;
}

int ca_track_py_frames(const void *site, const ca_pyframe_t *const **frames) {
  if (!site || ca_config.track == CA_TRACK_CALLER) return 0;
  const ca_stack_t *s = site;
  *frames = (const ca_pyframe_t *const *)(s->frames + s->depth);
  return s->py;
}

void ca_track_forget(void) {
  ca_stackwalk_forget();
  pthread_mutex_lock(&stacks_lock);
  for (int i = 0; i < BUCKETS; i++) {
    while (buckets[i]) {
      ca_stack_t *s = buckets[i];
      buckets[i] = s->next;
      free(s);
    }
  }
  pthread_mutex_unlock(&stacks_lock);
  ca_py_forget();
  ca_symbolize_forget();
}

// ----------------------------------------------------------------------------
// Names
// ----------------------------------------------------------------------------

#define MAX_INLINED 8

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* "func (file:line)", or "func+0x1a" / "func" / "??" with less known. */
static void one_function(const ca_sym_t *s, void *pc, bool short_file, char *buf, size_t cap) {
  if (s->file[0])
    snprintf(buf, cap, "%s (%s:%d)", s->func[0] ? s->func : "??", short_file ? base_name(s->file) : s->file,
             s->line);
  else if (pc && s->func[0]) snprintf(buf, cap, "%s+0x%lx", s->func, (unsigned long)s->func_off);
  else snprintf(buf, cap, "%s", s->func[0] ? s->func : "??");
}

static void where_text(void *pc, const ca_sym_where_t *w, char *buf, size_t cap) {
  if (!w->module[0]) snprintf(buf, cap, "[%p]", pc);
  else snprintf(buf, cap, "[%p] in %s+0x%lx%s", pc, w->module, (unsigned long)w->offset,
                w->debug_info ? "" : w->libdw ? " (no debug info)" : " (no debug info read: libdw.so.1 not found)");
}

void ca_track_symbolize(void *pc, char *buf, size_t cap) {
  if (!pc) {
    snprintf(buf, cap, "(call site not recorded)");
    return;
  }
  ca_sym_t s[MAX_INLINED];
  ca_sym_where_t w;
  int n = ca_symbolize(pc, true, s, MAX_INLINED, &w);
  char fn[512], at[256], inl[512] = "";
  one_function(&s[n - 1], pc, false, fn, sizeof fn);
  size_t len = 0;
  for (int i = 0; i < n - 1 && len < sizeof inl; i++) {
    char one[400];
    one_function(&s[i], NULL, false, one, sizeof one);
    len += (size_t)snprintf(inl + len, sizeof inl - len, "%s%s", i ? ", " : " (inlined here: ", one);
  }
  if (n > 1 && len < sizeof inl) snprintf(inl + len, sizeof inl - len, ")");
  where_text(pc, &w, at, sizeof at);
  snprintf(buf, cap, "%s%s %s", fn, inl, at);
}

void ca_track_name(const void *site, char *buf, size_t cap) {
  void *const *frames;
  const ca_pyframe_t *const *py = NULL;   /* set whenever npy > 0; GCC with a profile cannot see that */
  int n = ca_track_frames(site, &frames), npy = ca_track_py_frames(site, &py);
  if (!n) {
    snprintf(buf, cap, "(call site not recorded%s)", ca_config.track == CA_TRACK_OFF ? ": track:off" : "");
    return;
  }
  /* The innermost few functions: enough to tell apart the callers of a helper. */
  enum { SHOWN = 3 };
  int shown = 0;
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < npy && shown < SHOWN && len < cap; i++, shown++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%s (%s:%d)", shown ? " < " : "", py[i]->func,
                            base_name(py[i]->file), py[i]->line);
  for (int i = 0; i < n && shown < SHOWN && len < cap; i++) {
    ca_sym_t s[MAX_INLINED];
    ca_sym_where_t w;
    int k = ca_symbolize(frames[i], true, s, MAX_INLINED, &w);
    for (int j = 0; j < k && shown < SHOWN && len < cap; j++, shown++) {
      char one[400];
      one_function(&s[j], j == k - 1 ? frames[i] : NULL, true, one, sizeof one);
      if (!w.debug_info && w.module[0] && j == k - 1)
        snprintf(one + strlen(one), sizeof one - strlen(one), " in %s+0x%lx", w.module, (unsigned long)w.offset);
      len += (size_t)snprintf(buf + len, cap - len, "%s%s", shown ? " < " : "", one);
    }
  }
}

void ca_track_print(FILE *f, const void *site, const char *prefix) {
  void *const *frames;
  const ca_pyframe_t *const *py = NULL;   /* set whenever npy > 0; GCC with a profile cannot see that */
  int n = ca_track_frames(site, &frames), npy = ca_track_py_frames(site, &py);
  if (!n) {
    fprintf(f, "%s(call site not recorded%s)\n", prefix, ca_config.track == CA_TRACK_OFF ? ": track:off" : "");
    return;
  }
  for (int i = 0; i < npy; i++)
    fprintf(f, "%sPython Frame: %s at %s:%d\n", prefix, py[i]->func, py[i]->file, py[i]->line);
  for (int i = 0; i < n; i++) {
    ca_sym_t s[MAX_INLINED];
    ca_sym_where_t w;
    int k = ca_symbolize(frames[i], true, s, MAX_INLINED, &w);
    char one[512], at[256];
    for (int j = 0; j < k - 1; j++) {
      one_function(&s[j], NULL, false, one, sizeof one);
      fprintf(f, "%sHost Frame: %s (inlined)\n", prefix, one);
    }
    one_function(&s[k - 1], frames[i], false, one, sizeof one);
    where_text(frames[i], &w, at, sizeof at);
    fprintf(f, "%sHost Frame: %s %s\n", prefix, one, at);
  }
}
