/* Plain SVG line chart of memory per step (see svg.h). */
#include <stdio.h>

#include "svg.h"

#define W 800
#define H 420
#define LEFT 70
#define RIGHT 20
#define TOP 50
#define BOTTOM 50
#define MIB (1024.0 * 1024.0)

typedef struct frame_s {
  int steps;
  double ymax;  /* MiB at the top of the plot */
} frame_t;

static double px(const frame_t *f, double step) {
  return LEFT + (W - LEFT - RIGHT) * (f->steps > 1 ? step / (f->steps - 1) : 0.5);
}

static double py(const frame_t *f, double mib) {
  return H - BOTTOM - (H - TOP - BOTTOM) * mib / f->ymax;
}

/* Writes text with the five XML special characters escaped. */
static void put_text(FILE *out, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '<': fputs("&lt;", out); break;
    case '>': fputs("&gt;", out); break;
    case '&': fputs("&amp;", out); break;
    case '"': fputs("&quot;", out); break;
    case '\'': fputs("&apos;", out); break;
    default: fputc(*s, out);
    }
  }
}

static void axes(FILE *out, const frame_t *f, int warmup) {
  if (warmup > 0)
    fprintf(out, "<rect x='%.1f' y='%d' width='%.1f' height='%d' fill='#eeeeee'/>\n"
            "<text x='%.1f' y='%d' font-size='12' fill='#666'>warm-up</text>\n",
            px(f, 0), TOP, px(f, warmup - 0.5 < f->steps - 1 ? warmup - 0.5 : f->steps - 1) - px(f, 0),
            H - TOP - BOTTOM,
            px(f, 0) + 4, TOP + 14);
  fprintf(out, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>\n", LEFT, H - BOTTOM,
          W - RIGHT, H - BOTTOM);
  fprintf(out, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>\n", LEFT, TOP, LEFT,
          H - BOTTOM);
  for (int i = 0; i <= 4; i++) {
    double mib = f->ymax * i / 4;
    fprintf(out, "<text x='%d' y='%.1f' font-size='11' text-anchor='end'>%.1f</text>\n",
            LEFT - 6, py(f, mib) + 4, mib);
  }
  for (int s = 0; s < f->steps; s += f->steps > 20 ? 10 : 1)
    fprintf(out, "<text x='%.1f' y='%d' font-size='11' text-anchor='middle'>%d</text>\n",
            px(f, s), H - BOTTOM + 16, s);
  fprintf(out, "<text x='%d' y='%d' font-size='12' text-anchor='middle'>step</text>\n",
          (LEFT + W - RIGHT) / 2, H - 10);
  fprintf(out, "<text x='14' y='%d' font-size='12' transform='rotate(-90 14 %d)' "
          "text-anchor='middle'>MiB</text>\n", (TOP + H - BOTTOM) / 2, (TOP + H - BOTTOM) / 2);
}

static void line(FILE *out, const frame_t *f, const svg_series_t *s, int index) {
  fprintf(out, "<polyline fill='none' stroke='%s' stroke-width='2'%s points='", s->colour,
          s->dashed ? " stroke-dasharray='6 4'" : "");
  for (int i = 0; i < f->steps; i++) fprintf(out, "%.1f,%.1f ", px(f, i), py(f, s->y[i] / MIB));
  fprintf(out, "'/>\n<text x='%d' y='%d' font-size='12' fill='%s'>", LEFT + 10 + 170 * index,
          TOP - 8, s->colour);
  put_text(out, s->label);
  fputs("</text>\n", out);
}

int svg_write(const char *path, const char *title, const char *note, int steps, int warmup,
              const svg_series_t *series, int nseries) {
  FILE *out = fopen(path, "w");
  if (!out) return -1;
  frame_t f = {steps, 1.0};
  for (int k = 0; k < nseries; k++)
    for (int i = 0; i < steps; i++)
      if (series[k].y[i] / MIB * 1.1 > f.ymax) f.ymax = series[k].y[i] / MIB * 1.1;
  fprintf(out, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
          "font-family='sans-serif'>\n<rect width='100%%' height='100%%' fill='white'/>\n", W, H);
  fputs("<title>", out);
  put_text(out, title);
  fputs("</title>\n<desc>", out);
  put_text(out, note ? note : "");
  fprintf(out, "</desc>\n<text x='%d' y='22' font-size='14' text-anchor='middle'>", W / 2);
  put_text(out, title);
  fputs("</text>\n", out);
  axes(out, &f, warmup);
  for (int k = 0; k < nseries; k++) line(out, &f, &series[k], k);
  fputs("</svg>\n", out);
  return fclose(out) == 0 ? 0 : -1;
}
