/* Where the workload's memory figures come from, found at run time: cudalloc's
 * statistics when the library is there (preloaded, or linked), else the
 * driver's view (cudaMemGetInfo) and the workload's own count of live bytes. */
#ifndef KERNELS_MEMSTATS_H
#define KERNELS_MEMSTATS_H

typedef struct memstats_s {
  double allocated;      /* bytes in live blocks */
  double reserved;       /* bytes held from the device */
  double peak_allocated; /* the program's highest live bytes since memstats_reset_peak */
  double peak_reserved;  /* cudalloc's highest reserved of the run, else the current value */
} memstats_t;

/* Looks cudalloc up; returns a line that says where the figures come from. */
const char *memstats_init(void);
/* 1 when the figures come from cudalloc. */
int memstats_from_cudalloc(void);
void memstats_read(memstats_t *out);
/* Starts a new within-step peak. cudalloc's own peaks are left alone: they
 * are the run's, which its reports use. */
void memstats_reset_peak(void);
/* Tells cudalloc that a training step ended (cudalloc_step: it settles
 * what it can of the step's frees before the statistics are read), if
 * present. */
void memstats_step(void);

#endif /* KERNELS_MEMSTATS_H */
