/* "pystack.c": the Python stack of the allocating thread, under track:python. */
#ifndef CUDALLOC_PYSTACK_H
#define CUDALLOC_PYSTACK_H

/* One Python frame, stored once however many sites name it. */
typedef struct ca_pyframe_s {
  struct ca_pyframe_s *next;  /* the store's chain */
  const char *file, *func;
  int line;
} ca_pyframe_t;

#define CA_PY_MAX_FRAMES 32

/* When the calling thread holds the GIL of a CPython found in the process
 * (by name, at run time: no build dependency on Python): its frames,
 * innermost first, at most max (≤ CA_PY_MAX_FRAMES). Else 0. */
int ca_py_stack(const ca_pyframe_t **out, int max);

/* Frees the stored frames (at shutdown, with the sites that name them). */
void ca_py_forget(void);

#endif /* CUDALLOC_PYSTACK_H */
