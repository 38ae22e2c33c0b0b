/* Environment variables without getenv(): a preloaded library may need one
 * (CUDALLOC_CONF, a rank) before libc's own start-up has run. */
#include "env.h"

#include <string.h>

const char *ca_getenv(const char *name) {
  extern char **environ;
  size_t n = strlen(name);
  for (char **e = environ; e && *e; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  return NULL;
}
