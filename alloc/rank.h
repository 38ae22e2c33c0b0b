/* "rank.c": which process of a job this is (torchrun, mpirun, srun), read
 * from the launchers' environment variables, so that the lines and report
 * files of several processes can be told apart. */
#ifndef CUDALLOC_RANK_H
#define CUDALLOC_RANK_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ca_rank_s {
  const char *var;       /* the variable the rank came from; NULL: none */
  const char *text;      /* its value (digits only); NULL: none */
  long rank;             /* -1: unknown */
  long world;            /* processes in the job; 0: unknown */
  bool several;          /* one of several processes of a job */
  const char *bad;       /* a launcher variable set to something not a number; NULL: none */
} ca_rank_t;

/* Read afresh on every call (a handful of environment lookups): nothing to
 * keep in step across fork, setenv or a test that changes the variables.
 * The rank is the first set of RANK, OMPI_COMM_WORLD_RANK, PMIX_RANK,
 * PMI_RANK, SLURM_PROCID, then LOCAL_RANK (unique on one host only); the
 * size the first of WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * SLURM_NTASKS, LOCAL_WORLD_SIZE. "Several": a size above 1, or a rank
 * with no size. */
void ca_rank_get(ca_rank_t *out);

/* What every stderr line of a process that is one of several carries:
 * "rank 3", "local rank 1" (LOCAL_RANK only), "pid 1234" (a size but no
 * rank); "" when the process is alone. */
void ca_rank_tag(char *buf, size_t cap);

/* true unless the process is known to be a rank other than 0. */
bool ca_rank_is_first(void);

#endif /* CUDALLOC_RANK_H */
