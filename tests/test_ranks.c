/* Many processes, one job (issue 10, item 8): the rank read from the
 * launchers' variables, every stderr line tagged with it, each summary in
 * one write, %r/%h in report paths, the warning when ranks would share a
 * report file, summary:rank0, and bench/ranks/ranks_table.py over the JSON
 * reports of a job. Four fake ranks (environment variables) run at once. */
#include "core_testing.h"
#include "test_shim.h"
#include "log.h"

#include <sys/stat.h>
#include <unistd.h>

static const char *const launcher_vars[] = {"RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
                                            "LOCAL_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                            "SLURM_NTASKS", "LOCAL_WORLD_SIZE"};

static void clear_launcher_vars(void) {
  for (size_t i = 0; i < sizeof launcher_vars / sizeof *launcher_vars; i++) unsetenv(launcher_vars[i]);
}

TestSuite(ranks, .init = clear_launcher_vars, .fini = core_fini);

// ----------------------------------------------------------------------------
// The rank
// ----------------------------------------------------------------------------

Test(ranks, alone_without_launcher_variables) {
  ca_rank_t r;
  ca_rank_get(&r);
  cr_assert(!r.several && !r.text && r.rank == -1 && r.world == 0 && !r.bad);
  char tag[48];
  ca_rank_tag(tag, sizeof tag);
  cr_assert_str_empty(tag);
  cr_assert(ca_rank_is_first());
  setenv("WORLD_SIZE", "1", 1);   /* a job of one: alone too */
  setenv("RANK", "0", 1);
  ca_rank_get(&r);
  cr_assert_not(r.several);
}

Test(ranks, each_launchers_variables) {
  static const struct { const char *rank, *size, *tag; } cases[] = {
    {"RANK", "WORLD_SIZE", "rank 3"},                       /* torchrun */
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "rank 3"}, /* Open MPI */
    {"PMIX_RANK", "WORLD_SIZE", "rank 3"},                  /* PMIx (no size variable of its own) */
    {"PMI_RANK", "PMI_SIZE", "rank 3"},                     /* MPICH, Intel MPI */
    {"SLURM_PROCID", "SLURM_NTASKS", "rank 3"},             /* srun */
    {"LOCAL_RANK", "LOCAL_WORLD_SIZE", "local rank 3"},     /* unique on one host only */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    clear_launcher_vars();
    setenv(cases[i].rank, "3", 1);
    setenv(cases[i].size, "4", 1);
    ca_rank_t r;
    ca_rank_get(&r);
    cr_assert(r.several && r.rank == 3 && r.world == 4, "%s", cases[i].rank);
    cr_assert_str_eq(r.var, cases[i].rank);
    char tag[48];
    ca_rank_tag(tag, sizeof tag);
    cr_assert_str_eq(tag, cases[i].tag);
    cr_assert_not(ca_rank_is_first());
  }
}

Test(ranks, global_rank_wins_and_a_bad_value_is_named) {
  setenv("LOCAL_RANK", "1", 1);
  setenv("SLURM_PROCID", "5", 1);
  setenv("RANK", "abc", 1);   /* input tried: not a number */
  ca_rank_t r;
  ca_rank_get(&r);
  cr_assert_str_eq(r.var, "SLURM_PROCID", "the global rank, past the bad one, before LOCAL_RANK");
  cr_assert_eq(r.rank, 5);
  cr_assert_str_eq(r.bad, "RANK");
  cr_assert(r.several, "a rank with no size: one of several");
  setenv("RANK", "-1", 1);
  ca_rank_get(&r);
  cr_assert_str_eq(r.bad, "RANK");
}

Test(ranks, a_size_without_a_rank_tags_lines_with_the_pid) {
  setenv("WORLD_SIZE", "2", 1);
  char tag[48], want[48];
  ca_rank_tag(tag, sizeof tag);
  snprintf(want, sizeof want, "pid %ld", (long)getpid());
  cr_assert_str_eq(tag, want);
}

// ----------------------------------------------------------------------------
// Lines
// ----------------------------------------------------------------------------

Test(ranks, every_log_line_carries_the_rank) {
  capture_t c;
  char out[4096];
  capture_begin(&c);
  ca_log("alone %d", 1);
  setenv("RANK", "2", 1);
  setenv("WORLD_SIZE", "4", 1);
  ca_log("one of %d", 4);
  const char text[] = "cudalloc: first\ncudalloc:   indented\n| a table row |\nno newline at the end";
  ca_log_text(text, sizeof text - 1);
  capture_end(&c, out, sizeof out);
  cr_assert_str_eq(out, "cudalloc: alone 1\n"
                        "cudalloc[rank 2]: one of 4\n"
                        "cudalloc[rank 2]: first\n"
                        "cudalloc[rank 2]:   indented\n"
                        "cudalloc[rank 2]: | a table row |\n"
                        "cudalloc[rank 2]: no newline at the end");
}

Test(ranks, configuration_warnings_carry_the_rank) {
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  capture_t c;
  char out[4096];
  capture_begin(&c);
  cr_assert_eq(ca_config_load("no_such_key:1"), 1);
  capture_end(&c, out, sizeof out);
  cr_assert(strncmp(out, "cudalloc[rank 1]: CUDALLOC_CONF: unknown key 'no_such_key'", 58) == 0, "%s", out);
  ca_config_defaults(&ca_config);
}

// ----------------------------------------------------------------------------
// Report paths
// ----------------------------------------------------------------------------

Test(ranks, report_paths_expand_rank_and_host) {
  char out[512], host[256], want[600];
  gethostname(host, sizeof host);
  setenv("SLURM_PROCID", "7", 1);
  cr_assert(ca_config_expand_path("/tmp/%h/job-%r", ".json", out, sizeof out));
  snprintf(want, sizeof want, "/tmp/%s/job-7.json", host);
  cr_assert_str_eq(out, want);
}

/* ca_report_check_job's warning, as ca_init gives it; returns stderr. */
static const char *check_job(const char *report, char *out, size_t cap) {
  ca_config_defaults(&ca_config);
  snprintf(ca_config.report, sizeof ca_config.report, "%s", report);
  capture_t c;
  capture_begin(&c);
  ca_report_check_job();
  return capture_end(&c, out, cap);
}

Test(ranks, warns_when_ranks_would_write_the_same_report) {
  char out[1024];
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "4", 1);
  check_job("/tmp/run/job", out, sizeof out);
  cr_assert_str_eq(out, "cudalloc[rank 0]: report path '/tmp/run/job' names the same files in each of the 4 "
                        "processes of this job (RANK): they would overwrite each other; add %r (rank) or %p (pid) "
                        "to it\n");
  check_job("/tmp/%h/job", out, sizeof out);   /* the host alone does not tell ranks of one host apart */
  cr_assert_not_null(strstr(out, "names the same files"), "%s", out);
  cr_assert_str_empty(check_job("/tmp/run/job-%r", out, sizeof out), "%s", out);
  cr_assert_str_empty(check_job("/tmp/run/job-%p", out, sizeof out), "%s", out);
  cr_assert_str_empty(check_job("", out, sizeof out), "no report, no warning: %s", out);
  clear_launcher_vars();
  cr_assert_str_empty(check_job("/tmp/run/job", out, sizeof out), "alone: %s", out);
  setenv("PMI_RANK", "x1", 1);
  cr_assert_str_eq(check_job("", out, sizeof out),
                   "cudalloc: PMI_RANK='x1' is not a number: this process's rank is not read from it\n");
  ca_config_defaults(&ca_config);
}

// ----------------------------------------------------------------------------
// Four ranks at once, one pipe
// ----------------------------------------------------------------------------

/* The tag of a line written by cudalloc ("rank 3" of "cudalloc[rank 3]: ..."),
 * "" for an untagged cudalloc line, NULL for a line of the program's own. */
static const char *line_tag(const char *line, char *tag, size_t cap) {
  if (strncmp(line, "cudalloc: ", 10) == 0) return tag[0] = 0, tag;
  if (strncmp(line, "cudalloc[", 9) != 0) return NULL;
  const char *end = strstr(line, "]: ");
  if (!end || (size_t)(end - line - 9) >= cap) return NULL;
  snprintf(tag, cap, "%.*s", (int)(end - line - 9), line + 9);
  return tag;
}

/* NULL when every cudalloc line of out is tagged and each tag's summary
 * (from its "summary (" line to its "leaks:" line and the site lines
 * after it) is contiguous; else a message naming the first offence. */
static const char *job_offence(const char *out, int ranks, char *why, size_t cap) {
  char tag[48], open[48] = "";
  int summaries = 0;
  bool in_sites = false;
  for (const char *line = out; *line;) {
    const char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    const char *t = line_tag(line, tag, sizeof tag);
    if (t && !t[0]) return snprintf(why, cap, "untagged line: %.*s", (int)len, line), why;
    bool summary_start = t && strstr(line, "]: summary (") && strstr(line, "]: summary (") < line + len;
    bool site_line = t && len > 20 && strncmp(line + strlen(t) + 11, "       ", 7) == 0;
    if (open[0] && !(t && strcmp(t, open) == 0 && !summary_start) && !(in_sites && t && strcmp(t, open) == 0 && site_line)) {
      if (!in_sites) return snprintf(why, cap, "summary of %s broken by: %.*s", open, (int)len, line), why;
      open[0] = 0;   /* the summary ended with its last site line */
      in_sites = false;
    }
    if (summary_start) snprintf(open, sizeof open, "%s", t), summaries++;
    if (open[0] && strstr(line, "leaks: ") && strstr(line, "leaks: ") < line + len) in_sites = true;
    line += len + (nl != NULL);
  }
  if (summaries != ranks) return snprintf(why, cap, "%d summaries for %d ranks", summaries, ranks), why;
  return NULL;
}

/* The checker itself catches an interleaved summary and an untagged line. */
Test(ranks, the_interleaving_check_catches_what_it_should) {
  char why[256];
  const char *good = "cudalloc[rank 0]: summary (x)\ncudalloc[rank 0]:   device\ncudalloc[rank 0]:     leaks: 1\n"
                     "cudalloc[rank 0]:       1 MiB from site\nrank_job: ok\n"
                     "cudalloc[rank 1]: summary (x)\ncudalloc[rank 1]:     leaks: 0\n";
  cr_assert_null(job_offence(good, 2, why, sizeof why), "%s", why);
  const char *mixed = "cudalloc[rank 0]: summary (x)\ncudalloc[rank 1]: summary (x)\ncudalloc[rank 0]:     leaks: 1\n"
                      "cudalloc[rank 1]:     leaks: 0\n";
  cr_assert_not_null(job_offence(mixed, 2, why, sizeof why));
  cr_assert_not_null(strstr(why, "summary of rank 0 broken by"), "%s", why);
  const char *untagged = "cudalloc: summary (x)\n";
  cr_assert_not_null(job_offence(untagged, 1, why, sizeof why));
  cr_assert_not_null(strstr(why, "untagged"), "%s", why);
}

/* Runs four ranks of rank_job at once, all writing to one pipe, each
 * configured with conf ("<dir>" stands for a fresh folder); returns their
 * output and the folder. */
static shim_run_t *run_job(const char *conf_tail, char *dir, size_t cap) {
  snprintf(dir, cap, "/tmp/cudalloc-job-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  char pre[512], cmd[2048];
  shim_preload(pre, sizeof pre);
  /* they wait for <dir>/go, so that they exit (and write) together */
  snprintf(cmd, sizeof cmd,
           "sh -c 'for r in 0 1 2 3; do RANK=$r WORLD_SIZE=4 LD_PRELOAD=\"%s\" "
           "CUDALLOC_CONF=\"backend:sim,report:%s/job-%%r%s\" %s/progs/rank_job %s/go & done; "
           "sleep 0.2; touch %s/go; wait'",
           pre, dir, conf_tail, shim_build(), dir, dir);
  return shim_sh("", cmd);
}

static void remove_job(const char *dir) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(ranks, four_ranks_on_one_pipe_write_tagged_whole_summaries) {
  char dir[64], why[512];
  shim_run_t *r = run_job("", dir, sizeof dir);
  cr_assert_eq(r->status, 0, "%s", r->out);
  cr_assert_eq(count_of(r->out, "rank_job: ok"), 4, "%s", r->out);
  const char *offence = job_offence(r->out, 4, why, sizeof why);
  cr_assert_null(offence, "%s in:\n%s", why, r->out);
  for (int k = 0; k < 4; k++) {
    char want[128];
    snprintf(want, sizeof want, "cudalloc[rank %d]: free of ", k);   /* the bad free's line */
    cr_assert_not_null(strstr(r->out, want), "%s in:\n%s", want, r->out);
    snprintf(want, sizeof want, "cudalloc[rank %d]:     leaks: %d blocks", k, k + 1);
    cr_assert_not_null(strstr(r->out, want), "%s in:\n%s", want, r->out);
  }
  remove_job(dir);
}

Test(ranks, summary_rank0_prints_one_summary) {
  char dir[64];
  shim_run_t *r = run_job(",summary:rank0", dir, sizeof dir);
  cr_assert_eq(r->status, 0, "%s", r->out);
  cr_assert_eq(count_of(r->out, "]: summary ("), 1, "%s", r->out);
  cr_assert_not_null(strstr(r->out, "cudalloc[rank 0]: summary ("), "%s", r->out);
  cr_assert_eq(count_of(r->out, "]: free of "), 4, "the other lines still come from every rank:\n%s", r->out);
  struct stat st;
  char json[128];
  snprintf(json, sizeof json, "%s/job-3-stats.json", dir);
  cr_assert_eq(stat(json, &st), 0, "every rank still writes its report files");
  remove_job(dir);
}

// ----------------------------------------------------------------------------
// bench/ranks/ranks_table.py
// ----------------------------------------------------------------------------

static shim_run_t *ranks_table(const char *args) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "python3 bench/ranks/ranks_table.py %s", args);
  return shim_sh("", cmd);
}

#define NEED_PYTHON() \
  if (system("command -v python3 >/dev/null 2>&1") != 0) cr_skip_test("python3 is not installed")

Test(ranks, the_table_of_a_jobs_reports) {
  NEED_PYTHON();
  char dir[64], args[256], host[256];
  shim_run_t *job = run_job("", dir, sizeof dir);
  cr_assert_eq(job->status, 0, "%s", job->out);
  snprintf(args, sizeof args, "%s/job-*-stats.json", dir);
  shim_run_t *r = ranks_table(args);
  cr_assert_eq(r->status, 0, "%s", r->out);
  gethostname(host, sizeof host);
  cr_assert(strncmp(r->out, "rank  host", 10) == 0, "%s", r->out);
  /* rank k leaked k+1 blocks of k+1 MiB; its peak: 8 MiB kept + those */
  static const char *const rows[] = {"9.0 MiB", "12.0 MiB", "17.0 MiB", "24.0 MiB"};
  const char *at = r->out;
  for (int k = 0; k < 4; k++) {
    char rank[16], leaks[64];
    snprintf(rank, sizeof rank, "\n%d ", k);
    const char *row = strstr(at, rank);
    cr_assert_not_null(row, "no row for rank %d (in order) in:\n%s", k, r->out);
    const char *end = strchr(row + 1, '\n');
    cr_assert_not_null(strstr(row, host), "%s", r->out);
    cr_assert(strstr(row, rows[k]) && strstr(row, rows[k]) < end, "rank %d's peak %s in:\n%s", k, rows[k], r->out);
    snprintf(leaks, sizeof leaks, "%llu B in %d", (unsigned long long)(k + 1) * (k + 1) * MiB, k + 1);
    cr_assert(strstr(row, leaks) && strstr(row, leaks) < end, "rank %d's leaks %s in:\n%s", k, leaks, r->out);
    at = row + 1;
  }
  cr_assert_not_null(strstr(r->out, "highest peak: rank 3 (24.0 MiB); lowest: rank 0 (9.0 MiB)"), "%s", r->out);
  remove_job(dir);
}

/* Input tried: a report with fields missing (older, or before another
 * report's fields exist), one with the OOM and creep fields other reports
 * add, a file that is not JSON, one that is JSON but not cudalloc's. */
Test(ranks, the_table_prints_what_a_report_lacks_as_a_dash) {
  NEED_PYTHON();
  char dir[] = "/tmp/cudalloc-table-XXXXXX", a[128], b[128], c[128], d[128], args[600];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(a, sizeof a, "%s/a.json", dir);
  snprintf(b, sizeof b, "%s/b.json", dir);
  snprintf(c, sizeof c, "%s/c.json", dir);
  snprintf(d, sizeof d, "%s/d.json", dir);
  FILE *f = fopen(a, "w");
  fputs("{\"schema\": \"cudalloc-stats/1\", \"job\": {\"rank\": 1}, \"devices\": [{}]}\n", f);
  fclose(f);
  f = fopen(b, "w");
  fputs("{\"schema\": \"cudalloc-stats/1\", \"job\": {\"rank\": 0, \"host\": \"n1\", \"pid\": 42},"
        " \"oom\": {\"verdict\": \"fragmented\"}, \"creep\": {\"verdict\": \"growing\"},"
        " \"devices\": [{\"stats\": {\"allocated_bytes\": {\"peak\": 2097152}, \"num_ooms\": {\"total\": 2}},"
        " \"leaks\": []}]}\n", f);
  fclose(f);
  f = fopen(c, "w");
  fputs("not json", f);
  fclose(f);
  f = fopen(d, "w");
  fputs("{\"schema\": \"other/1\"}", f);
  fclose(f);
  snprintf(args, sizeof args, "%s %s %s %s", a, b, c, d);
  shim_run_t *r = ranks_table(args);
  cr_assert_eq(r->status, 0, "%s", r->out);
  cr_assert_not_null(strstr(r->out, "\n0     n1    42   2.0 MiB         -              0 B in 0                 2 (fragmented)  growing\n"), "%s", r->out);
  cr_assert_not_null(strstr(r->out, "\n1     -     -    -               -              -                        -               -\n"), "%s", r->out);
  cr_assert_not_null(strstr(r->out, "ranks_table: skipped"), "%s", r->out);
  cr_assert_not_null(strstr(r->out, "c.json"), "%s", r->out);
  cr_assert_not_null(strstr(r->out, "not a cudalloc report (schema 'other/1')"), "%s", r->out);
  snprintf(args, sizeof args, "%s", c);
  r = ranks_table(args);
  cr_assert_eq(r->status, 1, "nothing readable: %s", r->out);
  cr_assert_not_null(strstr(r->out, "ranks_table: no report could be read"), "%s", r->out);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}
