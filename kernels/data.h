/* Synthetic multimodal batches: the composition of every step (batch size,
 * image frames, audio length, text length) and the data itself, on the host.
 *
 * Each sample has an image class and an audio class. Every patch of every
 * frame is the image class's prototype plus noise; every audio frame is the
 * audio class's prototype plus noise. The text is BOS followed by the two
 * class tokens in turn (image, audio, image, ...), so its next token can be
 * predicted only by looking at the image and the audio: the loss falls as
 * the model learns to.
 */
#ifndef KERNELS_DATA_H
#define KERNELS_DATA_H

#include <stdint.h>

typedef struct data_config_s {
  int max_batch;              /* samples per step: 1..max_batch */
  int grid;                   /* patches per frame: grid x grid */
  int patch;                  /* pixels per patch side (3 colour channels) */
  int max_frames;             /* image frames per sample: 1..max_frames */
  int min_audio, max_audio;   /* spectrogram frames per sample */
  int mel_bins;               /* values per spectrogram frame */
  int min_text, max_text;     /* text tokens per sample, BOS included (>= 2) */
  int classes;                /* image classes = audio classes */
  int vocab;                  /* must hold BOS and 2 * classes tokens */
} data_config_t;

/* The composition of one step; every sample of the step has the same. */
typedef struct batch_shape_s {
  int B, frames;
  int Ti, Ta, Tt;   /* image, audio and text positions per sample */
  int T;            /* Ti + Ta + Tt: the sequence, image first, then audio, then text */
} batch_shape_t;

/* One batch on the host. Rows are (sample, position). */
typedef struct batch_s {
  batch_shape_t shape;
  float *patches;   /* (B * Ti, patch_dim) */
  float *audio;     /* (B * Ta, mel_bins) */
  int *tokens;      /* (B * Tt) */
  int *targets;     /* (B * Tt): the next text token, -1 for the last */
  int *modality;    /* (B * T): 0 image, 1 audio, 2 text */
  int targets_count;
} batch_t;

enum { MODALITY_IMAGE, MODALITY_AUDIO, MODALITY_TEXT, MODALITIES };

int data_patch_dim(const data_config_t *dc);
/* NULL when the configuration holds together, else what is wrong. */
const char *data_config_check(const data_config_t *dc);
/* The composition of a step. Step 0 takes the largest of every dimension:
 * the working set a training run must fit, seen first (see docs/workload.md);
 * the others are drawn from the seed, so that sizes change every step. */
void data_shape(const data_config_t *dc, uint64_t seed, int step, batch_shape_t *out);
/* Allocates and fills a batch (host memory); data_free releases it. */
void data_make(const data_config_t *dc, uint64_t seed, int step, batch_t *out);
void data_free(batch_t *b);

/* splitmix64: the seeded generator of the data and of the weights. */
uint64_t data_rand(uint64_t *state);
/* Uniform in [0, 1), and a normal deviate (Box-Muller). */
float data_uniform(uint64_t *state);
float data_normal(uint64_t *state);

#endif /* KERNELS_DATA_H */
