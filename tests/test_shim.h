/* Helpers of the preload tests: they build nothing, they run the programs
 * of tests/progs (built into $CUDALLOC_BUILD/progs) with or without
 * LD_PRELOAD=$CUDALLOC_BUILD/libcudalloc.so and look at what they did.
 *
 * Environment (set by tests/run.sh): CUDALLOC_BUILD, the build folder;
 * CUDALLOC_SAN_RUNTIME, the sanitizer runtime that a sanitized library
 * needs loaded before it (empty otherwise).
 */
#ifndef CUDALLOC_TEST_SHIM_H
#define CUDALLOC_TEST_SHIM_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define SHIM_OUT_MAX (256 * 1024)

typedef struct shim_run_s {
  int status;              /* exit status, or 128 + signal */
  char out[SHIM_OUT_MAX];  /* stdout and stderr, interleaved */
} shim_run_t;

static inline const char *shim_build(void) {
  const char *b = getenv("CUDALLOC_BUILD");
  return b && *b ? b : "build";
}

static inline const char *shim_san_runtime(void) {
  const char *r = getenv("CUDALLOC_SAN_RUNTIME");
  return r ? r : "";
}

/* The build's sanitizer, "asan" or "tsan" (CUDALLOC_SAN), or NULL. */
static inline const char *shim_sanitizer(void) {
  const char *s = getenv("CUDALLOC_SAN");
  return s && *s ? s : NULL;
}

/* LD_PRELOAD's value for the library (the sanitizer runtime first). */
static inline void shim_preload(char *buf, size_t cap) {
  snprintf(buf, cap, "%s %s/libcudalloc.so", shim_san_runtime(), shim_build());
}

/* Runs `cmd` (a shell command line) with the variables of `env` ("A=x B=y",
 * may be NULL) and returns what happened. */
static inline shim_run_t *shim_sh(const char *env, const char *cmd) {
  static shim_run_t r;
  char line[4096];
  snprintf(line, sizeof line, "env %s %s 2>&1", env ? env : "", cmd);
  FILE *p = popen(line, "r");
  cr_assert_not_null(p, "cannot run %s", line);
  size_t n = fread(r.out, 1, sizeof r.out - 1, p);
  r.out[n] = 0;
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return &r;
}

/* Runs program `prog` of tests/progs with `args`, preloaded with cudalloc
 * and configured with `conf` (NULL: CUDALLOC_CONF unset). */
static inline shim_run_t *shim_prog(const char *prog, const char *args, const char *conf) {
  char env[1024], pre[512], cmd[1024];
  shim_preload(pre, sizeof pre);
  if (conf) snprintf(env, sizeof env, "LD_PRELOAD='%s' CUDALLOC_CONF='%s'", pre, conf);
  else snprintf(env, sizeof env, "-u CUDALLOC_CONF LD_PRELOAD='%s'", pre);
  snprintf(cmd, sizeof cmd, "%s/progs/%s %s", shim_build(), prog, args ? args : "");
  return shim_sh(env, cmd);
}

/* The same program without the preload (nothing from cudalloc loaded). */
static inline shim_run_t *shim_prog_bare(const char *prog, const char *args, const char *conf) {
  char env[512], cmd[1024];
  snprintf(env, sizeof env, "-u LD_PRELOAD CUDALLOC_CONF='%s'", conf ? conf : "");
  snprintf(cmd, sizeof cmd, "%s/progs/%s %s", shim_build(), prog, args ? args : "");
  return shim_sh(env, cmd);
}

/* The program ran to its end: exit 0 and its "<prog>: ok" line, and the
 * simulated device's reuse oracle reported nothing. */
#define shim_assert_ok(r, prog)                                                         \
  do {                                                                                  \
    cr_assert_eq((r)->status, 0, "%s exited with %d:\n%s", prog, (r)->status, (r)->out); \
    cr_assert_not_null(strstr((r)->out, prog ": ok"), "%s did not finish:\n%s", prog, (r)->out); \
    cr_assert_null(strstr((r)->out, "reuse oracle:"), "%s: the reuse oracle objected:\n%s", prog, (r)->out); \
  } while (0)

#define shim_assert_has(r, text) \
  cr_assert_not_null(strstr((r)->out, text), "expected \"%s\" in:\n%s", text, (r)->out)
#define shim_assert_lacks(r, text) \
  cr_assert_null(strstr((r)->out, text), "did not expect \"%s\" in:\n%s", text, (r)->out)

#endif /* CUDALLOC_TEST_SHIM_H */
