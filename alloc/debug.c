/* What the test and sanitizer builds add to the core: the switches that
 * break a guard (test build only) and the failure path of ca_assert. The
 * release build compiles this file to nothing. */
#include "debug.h"

#include <stdlib.h>
#include <time.h>

#include "log.h"

#ifdef CA_TESTING
ca_debug_t ca_debug;

void ca_debug_pause(void) { nanosleep(&(struct timespec){.tv_nsec = 50000}, NULL); }
#endif

#if defined(CA_TESTING) || defined(CA_ASSERTS)
void ca_assert_fail(const char *cond, const char *file, int line, const char *func) {
  ca_log("internal assertion failed: %s (%s:%d, %s)", cond, file, line, func);
  abort();
}
#endif
