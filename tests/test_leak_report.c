/* The leak report from outside, as a user meets it: plain programs run
 * under LD_PRELOAD on the simulated device.
 *   - tests/progs/leak_three.c (a CUDA program with nothing of cudalloc's,
 *     built with -g) leaks three allocations from two functions: the exact
 *     summary line, both functions with file:line (one of them inlined).
 *   - the same binary without its debug information: names from the
 *     symbol table, and the report says "no debug info".
 *   - leak_exit_code:N makes the leaking program exit with N, a clean one not.
 *   - the JSON report (report:<prefix>) parses and carries the same numbers.
 *   - tests/progs/py_leak.py (track:python, ctypes.PyDLL) names both Python
 *     functions and their lines above the C frames. */
#include "test_shim.h"

#include <unistd.h>

#define CONF "backend:sim,sim_capacity_mb:64"

/* The numbers a program printed after "<prog>: lines ". */
static int printed_lines(const char *out, const char *prog, int *lines, int n) {
  char key[64];
  snprintf(key, sizeof key, "%s: lines", prog);
  const char *p = strstr(out, key);
  if (!p) return 0;
  p += strlen(key);
  int k = 0;
  for (char *end; k < n; k++, p = end) {
    lines[k] = (int)strtol(p, &end, 10);
    if (end == p) break;
  }
  return k;
}

/* The report entry (from its "Leaked" line to the blank "=========") that
 * contains text, or NULL. */
static const char *entry_with(const char *out, const char *text, char *buf, size_t cap) {
  for (const char *e = strstr(out, "========= Leaked "); e; e = strstr(e + 1, "========= Leaked ")) {
    const char *end = strstr(e, "=========\n");
    size_t len = end ? (size_t)(end - e) : strlen(e);
    snprintf(buf, cap, "%.*s", (int)len, e);
    if (strstr(buf, text)) return buf;
  }
  return NULL;
}

Test(leak_report, a_plain_program_gets_exact_bytes_functions_and_lines) {
  shim_run_t *r = shim_prog("leak_three", NULL, CONF);
  shim_assert_ok(r, "leak_three");
  int line[3];
  cr_assert_eq(printed_lines(r->out, "leak_three", line, 3), 3, "%s", r->out);
  shim_assert_has(r, "========= LEAK SUMMARY: 8196 bytes leaked in 3 allocations\n");
  /* one entry per stack, biggest first, each naming its function and line */
  const char *at[3] = {strstr(r->out, "Leaked 4196 bytes at 0x"), strstr(r->out, "Leaked 3000 bytes at 0x"),
                       strstr(r->out, "Leaked 1000 bytes at 0x")};
  cr_assert(at[0] && at[1] && at[2], "%s", r->out);
  cr_assert(at[0] < at[1] && at[1] < at[2], "biggest first:\n%s", r->out);
  const char *fn[3] = {"keep_buffer", "keep_weights", "keep_weights"};
  const int idx[3] = {2, 1, 0};
  for (int i = 0; i < 3; i++) {
    char want[96], buf[8192];
    snprintf(want, sizeof want, "Host Frame: %s (tests/progs/leak_three.c:%d)", fn[i], line[idx[i]]);
    cr_assert_not_null(entry_with(r->out, want, buf, sizeof buf), "no \"%s\" in:\n%s", want, r->out);
    cr_assert_not_null(strstr(buf, "Host Frame: main (tests/progs/leak_three.c:"), "the caller:\n%s", buf);
    cr_assert_not_null(strstr(buf, "made by thread "), "%s", buf);
    cr_assert_not_null(strstr(buf, "on the legacy default stream, in step 0"), "%s", buf);
  }
  shim_assert_lacks(r, "no debug info)\n=========     Host Frame: main");
}

/* The check above can fail: a wrong line or byte count is not found. */
Test(leak_report, a_wrong_expectation_is_not_found) {
  shim_run_t *r = shim_prog("leak_three", NULL, CONF);
  int line[3];
  cr_assert_eq(printed_lines(r->out, "leak_three", line, 3), 3, "%s", r->out);
  char want[96], buf[8192];
  snprintf(want, sizeof want, "Host Frame: keep_weights (tests/progs/leak_three.c:%d)", line[2]);
  cr_assert_null(entry_with(r->out, want, buf, sizeof buf), "keep_buffer's line is not keep_weights':\n%s", r->out);
  shim_assert_lacks(r, "LEAK SUMMARY: 8195 bytes");
  shim_assert_lacks(r, "leaked in 2 allocations");
}

Test(leak_report, without_debug_info_the_symbol_table_names_them_and_says_so) {
  char dir[] = "/tmp/cudalloc-nodebug-XXXXXX", cmd[1024], pre[512];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(cmd, sizeof cmd, "objcopy --strip-debug %s/progs/leak_three %s/leak_three", shim_build(), dir);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  shim_preload(pre, sizeof pre);
  char env[1024];
  snprintf(env, sizeof env, "LD_PRELOAD='%s' CUDALLOC_CONF='" CONF "'", pre);
  snprintf(cmd, sizeof cmd, "%s/leak_three", dir);
  shim_run_t *r = shim_sh(env, cmd);
  shim_assert_ok(r, "leak_three");
  shim_assert_has(r, "LEAK SUMMARY: 8196 bytes leaked in 3 allocations");
  shim_assert_has(r, "Host Frame: keep_weights+0x");
  shim_assert_has(r, "in leak_three+0x");
  shim_assert_has(r, "(no debug info)");
  shim_assert_lacks(r, "leak_three.c:");
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(leak_report, leak_exit_code_fails_a_leaking_program_only) {
  shim_run_t *r = shim_prog("leak_three", NULL, CONF ",leak_exit_code:7,quiet:true");
  cr_assert_eq(r->status, 7, "exit %d:\n%s", r->status, r->out);
  shim_assert_lacks(r, "LEAK SUMMARY");   /* quiet: the status alone */
  r = shim_prog("leak_three", "--clean", CONF ",leak_exit_code:7");
  shim_assert_ok(r, "leak_three");
  shim_assert_lacks(r, "Leaked");
  r = shim_prog("leak_three", NULL, CONF);
  cr_assert_eq(r->status, 0, "without the setting, the program's own status:\n%s", r->out);
}

Test(leak_report, json_report_has_the_same_leaks) {
  char dir[] = "/tmp/cudalloc-leakjson-XXXXXX", conf[256], cmd[1024];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(conf, sizeof conf, CONF ",quiet:true,report:%s/r", dir);
  shim_run_t *r = shim_prog("leak_three", NULL, conf);
  shim_assert_ok(r, "leak_three");
  /* valid JSON, and its fields: checked by Python's json module */
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
           "assert d[\"schema\"]==\"cudalloc-leaks/1\", d[\"schema\"]; "
           "assert (d[\"leaked_bytes\"], d[\"leaked_allocations\"])==(8196,3), d; "
           "l=d[\"leaks\"]; assert [x[\"bytes\"] for x in l]==[4196,3000,1000], l; "
           "f=[g[\"function\"] for x in l for fr in x[\"frames\"] for g in fr[\"functions\"]]; "
           "assert \"keep_weights\" in f and \"keep_buffer\" in f, f; "
           "assert all(x[\"first_step\"]==0 and x[\"thread\"]>0 for x in l); print(\"json ok\")' %s/r-leaks.json",
           dir);
  r = shim_sh(NULL, cmd);
  cr_assert_eq(r->status, 0, "%s", r->out);
  shim_assert_has(r, "json ok");
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(leak_report, python_frames_name_both_functions_and_lines) {
  if (system("command -v python3 >/dev/null 2>&1")) cr_skip_test("no python3");
  char env[1024], pre[512], cmd[1024];
  shim_preload(pre, sizeof pre);
  /* the sanitizers' own leak check would object to the interpreter's */
  snprintf(env, sizeof env, "ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD='%s' CUDALLOC_CONF='" CONF ",track:python'", pre);
  snprintf(cmd, sizeof cmd, "python3 tests/progs/py_leak.py %s/libcudalloc.so", shim_build());
  shim_run_t *r = shim_sh(env, cmd);
  shim_assert_ok(r, "py_leak");
  int line[2];
  cr_assert_eq(printed_lines(r->out, "py_leak", line, 2), 2, "%s", r->out);
  shim_assert_has(r, "LEAK SUMMARY: 8000 bytes leaked in 2 allocations");
  const char *fn[2] = {"load_weights", "make_activations"};
  for (int i = 0; i < 2; i++) {
    char want[128], buf[16384], line_end[64];
    snprintf(want, sizeof want, "Python Frame: %s at ", fn[i]);
    cr_assert_not_null(entry_with(r->out, want, buf, sizeof buf), "no \"%s\" in:\n%s", want, r->out);
    /* the script's path, as Python made it absolute, then its line */
    snprintf(line_end, sizeof line_end, "tests/progs/py_leak.py:%d\n", line[i]);
    const char *at = strstr(buf, want), *eol = strchr(at, '\n');
    cr_assert(eol && (size_t)(eol + 1 - at) > strlen(line_end) && !strncmp(eol + 1 - strlen(line_end), line_end, strlen(line_end)),
              "no \"%s\" in its frame:\n%s", line_end, buf);
    cr_assert_lt(strstr(buf, "Python Frame:"), strstr(buf, "Host Frame:"), "Python frames come first:\n%s", buf);
  }
}

/* Without track:python the same script has C frames only. */
Test(leak_report, python_frames_only_under_track_python) {
  if (system("command -v python3 >/dev/null 2>&1")) cr_skip_test("no python3");
  char env[1024], pre[512], cmd[1024];
  shim_preload(pre, sizeof pre);
  snprintf(env, sizeof env, "ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD='%s' CUDALLOC_CONF='" CONF "'", pre);
  snprintf(cmd, sizeof cmd, "python3 tests/progs/py_leak.py %s/libcudalloc.so", shim_build());
  shim_run_t *r = shim_sh(env, cmd);
  shim_assert_ok(r, "py_leak");
  shim_assert_has(r, "LEAK SUMMARY: 8000 bytes leaked in 2 allocations");
  shim_assert_lacks(r, "Python Frame:");
}
