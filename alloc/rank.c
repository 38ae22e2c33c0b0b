/* The rank of this process in a job, from the variables that torchrun,
 * Open MPI, PMIx/PMI launchers and Slurm set. */
#include "rank.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"

/* Global ranks first: LOCAL_RANK repeats on every host. */
static const char *const rank_vars[] = {"RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
                                        "LOCAL_RANK"};
static const char *const size_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS",
                                        "LOCAL_WORLD_SIZE"};

static bool all_digits(const char *s) {
  if (!*s) return false;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return false;
  return true;
}

/* The first variable of vars set to a number; a set one that is not a
 * number is skipped and named in *bad. */
static const char *first_number(const char *const *vars, size_t n, const char **var, const char **bad) {
  for (size_t i = 0; i < n; i++) {
    const char *v = ca_getenv(vars[i]);
    if (!v) continue;
    if (all_digits(v)) {
      *var = vars[i];
      return v;
    }
    if (!*bad) *bad = vars[i];
  }
  return NULL;
}

void ca_rank_get(ca_rank_t *out) {
  const char *size_var = NULL;
  *out = (ca_rank_t){.rank = -1};
  out->text = first_number(rank_vars, sizeof rank_vars / sizeof *rank_vars, &out->var, &out->bad);
  const char *size = first_number(size_vars, sizeof size_vars / sizeof *size_vars, &size_var, &out->bad);
  if (out->text) out->rank = strtol(out->text, NULL, 10);   /* digits only: LONG_MAX at worst */
  if (size) out->world = strtol(size, NULL, 10);
  out->several = out->world > 1 || (out->world == 0 && out->text);
}

void ca_rank_tag(char *buf, size_t cap) {
  ca_rank_t r;
  ca_rank_get(&r);
  if (!cap) return;
  buf[0] = 0;
  if (!r.several) return;
  if (!r.text) snprintf(buf, cap, "pid %ld", (long)getpid());
  else snprintf(buf, cap, "%srank %s", strcmp(r.var, "LOCAL_RANK") == 0 ? "local " : "", r.text);
}

bool ca_rank_is_first(void) {
  ca_rank_t r;
  ca_rank_get(&r);
  return r.rank <= 0;
}
