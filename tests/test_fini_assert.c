/* The suites' .fini checks (the reuse oracle's count in core_fini and
 * sim_fini) must fail their suite when they fail. Criterion 2.4 prints a
 * failed cr_assert in a .fini, counts the test as passed and exits 0, so
 * those checks used FINI_ASSERT (tests/testing.h), which aborts the
 * worker. With cr_assert in fini_probe.c's .fini, this test failed:
 * "fini_probe exited 0". */
#include <stdio.h>
#include <sys/wait.h>

#include "testing.h"

Test(fini_assert, a_failed_fini_check_fails_the_suite) {
  const char *b = getenv("CUDALLOC_BUILD");
  char cmd[512], out[4096] = "";
  /* without the worker's BXFI_MAP, which would make the probe a worker of this run */
  snprintf(cmd, sizeof cmd, "env -u BXFI_MAP %s/tests/fini_probe 2>&1", b && *b ? b : "build");
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = 0;
  int status = pclose(p);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0, "fini_probe exited 0:\n%s", out);
  cr_assert_not_null(strstr(out, "fini check failed: planted in fini_probe"), "%s", out);
}
