/* Finds a backend by name, and names the operations. */
#include "backend.h"

#include <string.h>

static const char *const op_names[CA_OP_COUNT] = {
#define CA_OP_NAME(op) #op,
    CA_BACKEND_OPS(CA_OP_NAME)
#undef CA_OP_NAME
};

const char *ca_backend_op_name(ca_backend_op_t op) {
  return (unsigned)op < CA_OP_COUNT ? op_names[op] : "?";
}

int ca_backend_op_from_name(const char *name, size_t len) {
  for (int op = 0; op < CA_OP_COUNT; op++)
    if (strlen(op_names[op]) == len && strncmp(op_names[op], name, len) == 0) return op;
  return -1;
}

static const ca_backend_t *const backends[] = {&ca_backend_cuda, &ca_backend_sim};

const unsigned *ca_backend_handout_watch(const ca_backend_t *be) {
  static const unsigned never = 0, always = 1;
  return !be->check_handout ? &never : be->handout_pending ? be->handout_pending : &always;
}

const ca_backend_t *ca_backend_find(const char *name) {
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
    if (name && strcmp(backends[i]->name, name) == 0) return backends[i];
  return NULL;
}
