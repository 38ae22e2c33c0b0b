/* Call sites of live blocks, as deep as `track` asks: nothing, the return
 * address of the allocating call (the default: one word, no cost), or a
 * whole backtrace. Backtraces are raw addresses, interned so that identical
 * stacks are stored once and a block holds one pointer; they are named
 * (dladdr) only when a report is written. */
#define _GNU_SOURCE /* dladdr */
#include "track.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define BUCKETS 4096

struct ca_stack_s {
  ca_stack_t *next;
  uint64_t hash;
  int depth;
  void *frames[];
};

static pthread_mutex_t stacks_lock = PTHREAD_MUTEX_INITIALIZER;
static ca_stack_t *buckets[BUCKETS];

static uint64_t hash_frames(void *const *frames, int n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < n; i++) h = (h ^ (uint64_t)(uintptr_t)frames[i]) * 0x100000001b3ull;
  return h;
}

/* The one stored copy of frames[0..n). */
static ca_stack_t *intern(void *const *frames, int n) {
  uint64_t h = hash_frames(frames, n);
  ca_stack_t **head = &buckets[h % BUCKETS];
  pthread_mutex_lock(&stacks_lock);
  ca_stack_t *s = *head;
  while (s && !(s->hash == h && s->depth == n && !memcmp(s->frames, frames, (size_t)n * sizeof *frames)))
    s = s->next;
  if (!s && (s = malloc(sizeof *s + (size_t)n * sizeof *frames))) {
    s->hash = h;
    s->depth = n;
    memcpy(s->frames, frames, (size_t)n * sizeof *frames);
    s->next = *head;
    *head = s;
  }
  pthread_mutex_unlock(&stacks_lock);
  return s;
}

void *ca_track_site(void *caller) {
  if (ca_config.track == CA_TRACK_OFF) return NULL;
  if (ca_config.track == CA_TRACK_CALLER) return caller;
  void *frames[64 + 8];
  int n = backtrace(frames, (int)ca_config.track_depth + 8);
  /* Drop cudalloc's own frames: the program's begin at the caller. */
  int first = 0;
  while (first < n && frames[first] != caller) first++;
  if (first == n) first = 0;
  if (n - first > (int)ca_config.track_depth) n = first + (int)ca_config.track_depth;
  return intern(frames + first, n - first);
}

int ca_track_frames(const void *site, void *const **frames) {
  if (!site) return 0;
  if (ca_config.track != CA_TRACK_BACKTRACE) {
    static __thread void *one;
    one = (void *)site;
    *frames = &one;
    return 1;
  }
  const ca_stack_t *s = site;
  *frames = s->frames;
  return s->depth;
}

void ca_track_forget(void) {
  pthread_mutex_lock(&stacks_lock);
  for (int i = 0; i < BUCKETS; i++) {
    while (buckets[i]) {
      ca_stack_t *s = buckets[i];
      buckets[i] = s->next;
      free(s);
    }
  }
  pthread_mutex_unlock(&stacks_lock);
}

void ca_track_symbolize(void *pc, char *buf, size_t cap) {
  Dl_info info;
  if (pc && dladdr(pc, &info) && info.dli_fname) {
    const char *lib = strrchr(info.dli_fname, '/');
    lib = lib ? lib + 1 : info.dli_fname;
    if (info.dli_sname)
      snprintf(buf, cap, "%s+0x%lx [%p] in %s", info.dli_sname,
               (unsigned long)((char *)pc - (char *)info.dli_saddr), pc, lib);
    else
      snprintf(buf, cap, "[%p] in %s+0x%lx", pc, lib, (unsigned long)((char *)pc - (char *)info.dli_fbase));
    return;
  }
  snprintf(buf, cap, pc ? "[%p]" : "(call site not recorded)", pc);
}

/* A call site by its innermost frame: the allocating line of the program. */
void ca_track_name(const void *site, char *buf, size_t cap) {
  void *const *frames;
  if (ca_track_frames(site, &frames)) ca_track_symbolize(frames[0], buf, cap);
  else snprintf(buf, cap, "(call site not recorded: track:off)");
}
