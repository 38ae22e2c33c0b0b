/* Python frames of an allocation, as PyTorch's memory snapshots show them:
 * when the allocating thread holds the GIL (a forward pass does; autograd's
 * backward threads do not), CPython's own C API gives its frames: file,
 * line and function. The API is looked up by name in the process
 * (dlsym(RTLD_DEFAULT)), so cudalloc neither links nor needs Python; a
 * process without it answers "no Python frames" for the price of one
 * pointer test (a lookup again every 1024 allocations, in case Python is
 * loaded later). Names are copied and stored once: a code object can be
 * freed long before its allocation is reported. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "pystack.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void py_t;   /* PyObject, PyFrameObject, PyCodeObject: opaque here */

/* The CPython functions used (3.9 and later export them all). */
static struct {
  int (*is_initialized)(void);
  int (*gil_check)(void);
  py_t *(*get_frame)(void);                 /* borrowed */
  py_t *(*frame_code)(py_t *);              /* new reference */
  int (*frame_line)(py_t *);
  py_t *(*frame_back)(py_t *);              /* new reference */
  py_t *(*getattr)(py_t *, const char *);   /* new reference */
  const char *(*utf8)(py_t *);
  void (*incref)(py_t *), (*decref)(py_t *);
  void (*err_fetch)(py_t **, py_t **, py_t **), (*err_restore)(py_t *, py_t *, py_t *);
} py;

static int found;             /* 1: every function found; else not (yet) */
static unsigned misses;

static bool resolve(void) {
  if (__atomic_load_n(&found, __ATOMIC_ACQUIRE)) return true;
  if (__atomic_fetch_add(&misses, 1, __ATOMIC_RELAXED) % 1024) return false;
  static const char *const names[] = {
    "Py_IsInitialized", "PyGILState_Check", "PyEval_GetFrame", "PyFrame_GetCode", "PyFrame_GetLineNumber",
    "PyFrame_GetBack", "PyObject_GetAttrString", "PyUnicode_AsUTF8", "Py_IncRef", "Py_DecRef", "PyErr_Fetch",
    "PyErr_Restore",
  };
  void *f[sizeof names / sizeof *names];
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!(f[i] = dlsym(RTLD_DEFAULT, names[i]))) return false;
  void **slots = (void **)&py;
  _Static_assert(sizeof py == sizeof f, "one slot per name");
  static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&once);
  memcpy(slots, f, sizeof f);
  __atomic_store_n(&found, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&once);
  return true;
}

// ----------------------------------------------------------------------------
// Frames stored once
// ----------------------------------------------------------------------------

#define BUCKETS 1024

static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER;
static ca_pyframe_t *store[BUCKETS];

static uint64_t hash_str(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

static const ca_pyframe_t *stored(const char *file, const char *func, int line) {
  uint64_t h = hash_str(hash_str(0xcbf29ce484222325ull ^ (uint64_t)line, file), func);
  ca_pyframe_t **head = &store[h % BUCKETS], *f;
  pthread_mutex_lock(&store_lock);
  for (f = *head; f; f = f->next)
    if (f->line == line && !strcmp(f->file, file) && !strcmp(f->func, func)) break;
  size_t nf = strlen(file) + 1, nn = strlen(func) + 1;
  if (!f && (f = malloc(sizeof *f + nf + nn))) {
    char *text = (char *)(f + 1);
    memcpy(text, file, nf);
    memcpy(text + nf, func, nn);
    *f = (ca_pyframe_t){*head, text, text + nf, line};
    *head = f;
  }
  pthread_mutex_unlock(&store_lock);
  return f;
}

/* Clears the exception a failed lookup of ours raised. */
static void drop_error(void) {
  py_t *e[3];
  py.err_fetch(&e[0], &e[1], &e[2]);
  for (int i = 0; i < 3; i++)
    if (e[i]) py.decref(e[i]);
}

static const char *attr_text(py_t *code, const char *name, py_t **keep) {
  *keep = py.getattr(code, name);
  return *keep ? py.utf8(*keep) : NULL;
}

int ca_py_stack(const ca_pyframe_t **out, int max) {
  if (!resolve() || !py.is_initialized() || !py.gil_check()) return 0;
  if (max > CA_PY_MAX_FRAMES) max = CA_PY_MAX_FRAMES;
  py_t *type, *value, *trace;   /* an exception the program has pending is not ours to clear */
  py.err_fetch(&type, &value, &trace);
  py_t *frame = py.get_frame();
  if (frame) py.incref(frame);
  int n = 0;
  while (frame && n < max) {
    py_t *code = py.frame_code(frame), *file_obj = NULL, *func_obj = NULL;
    const char *file = code ? attr_text(code, "co_filename", &file_obj) : NULL;
    const char *func = code ? attr_text(code, "co_qualname", &func_obj) : NULL;
    if (code && !func) {   /* before 3.11: no qualified name */
      drop_error();
      func = attr_text(code, "co_name", &func_obj);
    }
    const ca_pyframe_t *f = stored(file ? file : "?", func ? func : "?", py.frame_line(frame));
    if (f) out[n++] = f;
    if (file_obj) py.decref(file_obj);
    if (func_obj) py.decref(func_obj);
    if (code) py.decref(code);
    py_t *back = py.frame_back(frame);
    py.decref(frame);
    frame = back;
  }
  if (frame) py.decref(frame);
  drop_error();   /* whatever our lookups raised */
  py.err_restore(type, value, trace);
  return n;
}

void ca_py_forget(void) {
  pthread_mutex_lock(&store_lock);
  for (int i = 0; i < BUCKETS; i++) {
    while (store[i]) {
      ca_pyframe_t *f = store[i];
      store[i] = f->next;
      free(f);
    }
  }
  pthread_mutex_unlock(&store_lock);
}
