/* Memory per step as a plain SVG line chart: the workload's 50-step picture
 * and the core's creep curve (creep.c) draw with it. It depends on nothing
 * but stdio, so that both the core and the workload compile it. */
#ifndef CURVES_SVG_H
#define CURVES_SVG_H

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

#endif /* CURVES_SVG_H */
