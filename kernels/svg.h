/* The 50-step memory picture as plain SVG, written by the program. */
#ifndef KERNELS_SVG_H
#define KERNELS_SVG_H

typedef struct svg_series_s {
  const char *label, *colour;
  const double *y;   /* bytes per step */
  int dashed;
} svg_series_t;

/* Draws the series against the step (in order, the last on top), shades
 * steps [0, warmup), puts the title on top and the note, if any, in the
 * file's description. Returns 0, or -1 when the file cannot be written. */
int svg_write(const char *path, const char *title, const char *note, int steps, int warmup,
              const svg_series_t *series, int nseries);

#endif /* KERNELS_SVG_H */
