/*
 * What the CUDA benchmarks share: finding the GPU (or saying why there is
 * none, then exiting 0 with a JSON record of the skip), CUDA error checks,
 * and f16/bf16 encodings of host values. Header-only C99.
 */
#ifndef GENIE_BENCH_CUDA_BENCH_H
#define GENIE_BENCH_CUDA_BENCH_H

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench_util.h"

static inline void cb_cuda(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return;
  fprintf(stderr, "bench: %s failed: %s\n", what, cudaGetErrorString(e));
  exit(1);
}

/* Exits 0 after printing why nothing can be measured (and writing that as
 * the JSON record) unless this process has a CUDA device that Genie's
 * cuda:0 also reaches. */
static inline void cb_require_gpu(const char *bench, genie_context_t *ctx, const char *json_path) {
  char why[512] = "";
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    snprintf(why, sizeof why, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
  } else {
    genie_tensor_t *t = NULL;
    const int64_t one[1] = {1};
    if (genie_tensor_alloc(ctx, GENIE_DTYPE_F32, one, 1, "cuda:0", &t) != GENIE_OK)
      snprintf(why, sizeof why, "Genie cannot use cuda:0: %s", genie_last_error());
    genie_tensor_destroy(t);
  }
  if (!why[0]) return;
  printf("%s: %s; nothing measured\n", bench, why);
  if (json_path) {
    FILE *j = bu_json_open(json_path);
    fprintf(j, "{\"benchmark\": \"%s\", \"skipped\": ", bench);
    bu_json_str(j, why);
    fprintf(j, "}\n");
    bu_json_close(j, json_path);
  }
  genie_shutdown(ctx);
  exit(0);
}

static inline void cb_print_gpu(void) {
  struct cudaDeviceProp p;
  int driver = 0, runtime = 0;
  cb_cuda(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  printf("GPU: %s, %.1f GiB, driver %d.%d, runtime %d.%d\n", p.name, (double)p.totalGlobalMem / (1 << 30),
         driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
}

static inline uint16_t cb_f16(float f) { /* round to nearest even; no NaN needed here */
  uint32_t u, sign, exp, mant;
  memcpy(&u, &f, 4);
  sign = (u >> 16) & 0x8000u;
  exp = (u >> 23) & 0xffu;
  mant = u & 0x7fffffu;
  if (exp == 0 && mant == 0) return (uint16_t)sign;
  {
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal */
      uint32_t m = mant | 0x800000u;
      int shift = 14 - e;
      uint32_t half, rest;
      if (shift > 24) return (uint16_t)sign;
      half = m >> shift;
      rest = m & ((1u << shift) - 1);
      if (rest > (1u << (shift - 1)) || (rest == (1u << (shift - 1)) && (half & 1u))) ++half;
      return (uint16_t)(sign | half);
    }
    {
      uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rest = mant & 0x1fffu;
      if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
      return (uint16_t)(sign | h);
    }
  }
}

static inline uint16_t cb_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float cb_from_f16(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
  float f;
  if (exp == 0) {
    f = (float)mant / 16777216.0f; /* 2^-24 */
    return sign ? -f : f;
  }
  u = sign | ((exp == 31 ? 255u : exp - 15 + 127) << 23) | (mant << 13);
  memcpy(&f, &u, 4);
  return f;
}

static inline float cb_from_bf16(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* `n` values of `dtype` (f32, f16, bf16) at `out`, from a fixed pattern. */
static inline void cb_fill(genie_dtype_t dtype, size_t n, void *out, unsigned salt) {
  size_t i;
  for (i = 0; i < n; ++i) {
    float v = (float)((i * 2654435761u + salt) % 2001u) / 1000.0f - 1.0f;
    if (dtype == GENIE_DTYPE_F32)
      ((float *)out)[i] = v;
    else if (dtype == GENIE_DTYPE_F16)
      ((uint16_t *)out)[i] = cb_f16(v);
    else
      ((uint16_t *)out)[i] = cb_bf16(v);
  }
}

static inline float cb_load(genie_dtype_t dtype, const void *p, size_t i) {
  if (dtype == GENIE_DTYPE_F32) return ((const float *)p)[i];
  if (dtype == GENIE_DTYPE_F16) return cb_from_f16(((const uint16_t *)p)[i]);
  return cb_from_bf16(((const uint16_t *)p)[i]);
}

#endif
