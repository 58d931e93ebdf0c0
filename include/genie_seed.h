/*
 * genie_seed.h — deterministic input values and the output checksum shared
 * by the samples, the benchmarks and the `genie` CLI, so that a graph run
 * from C and the same graph run from JSON with `genie run` agree exactly.
 * A companion of genie.h, installed beside it; not part of the library's
 * ABI (everything here is static inline).
 *
 * Header-only C99 (also compiles as C++). Uses only genie.h for the dtype
 * enumeration.
 *
 * Seeded values. The values of a tensor are a pure function of its value
 * name, dtype and shape:
 *   state    = FNV-1a 64 of the name's bytes
 *   next()   = splitmix64(state)
 *   f32      = (((next() >> 40) / 16777216.0) * 2 - 1) * scale,
 *              scale = 1/sqrt(last dimension), 1 for a scalar
 *              (uniform in [-scale, scale): keeps activations of a stack of
 *              linear layers in range without special cases for any name)
 *   f16/bf16 = the f32 value rounded to nearest even
 *   i32/i64  = next() % 16
 *   bool     = next() & 1
 *
 * Checksum. Every element, converted to double, summed in double in index
 * (C) order. Printed with "%.6g": equal for bit-equal outputs; outputs that
 * differ only by last-bit rounding (another BLAS kernel) usually agree in
 * all six digits, but a digit may flip where the sum sits on a rounding
 * boundary.
 */
#ifndef GENIE_SEED_H
#define GENIE_SEED_H

#include <genie.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t genie_seed_fnv1a64(const char *name) {
  uint64_t h = 0xcbf29ce484222325ull;
  const unsigned char *p = (const unsigned char *)name;
  for (; *p; ++p) {
    h ^= *p;
    h *= 0x100000001b3ull;
  }
  return h;
}

static inline uint64_t genie_seed_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline uint32_t genie_seed_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static inline float genie_seed_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t genie_seed_f32_to_bf16(float f) {
  uint32_t u = genie_seed_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float genie_seed_bf16_to_f32(uint16_t b) { return genie_seed_bits_f32((uint32_t)b << 16); }

static inline uint16_t genie_seed_f32_to_f16(float f) {
  uint32_t u = genie_seed_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
  if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
  if (abs < 0x38800000u) {
    /* Subnormal half (or zero): the value in units of 2^-24, rounded to
     * nearest even by adding 0.5 ulp and letting the FPU round. */
    float mag = genie_seed_bits_f32(abs) * 16777216.0f;
    uint32_t q = (uint32_t)mag;
    float rem = mag - (float)q;
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return (uint16_t)(sign | q);
  }
  {
    uint32_t mant = abs & 0x7fffffu;
    uint32_t exp = (abs >> 23) - 127 + 15;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h; /* carries into exp */
    return (uint16_t)(sign | h);
  }
}

static inline float genie_seed_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float v = (float)mant / 16777216.0f; /* mant * 2^-24, exact */
    return sign ? -v : v;
  }
  if (exp == 31) return genie_seed_bits_f32(sign | 0x7f800000u | (mant << 13));
  return genie_seed_bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

/* Number of elements of a shape (1 for rank 0). */
static inline size_t genie_seed_count(const int64_t *shape, size_t ndim) {
  size_t n = 1;
  size_t i;
  for (i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  return n;
}

/* Fills `out` (room for count(shape) elements of dtype) with the seeded
 * values of value `name`. Returns 0, or -1 for an invalid dtype. */
static inline int genie_seed_fill(const char *name, genie_dtype_t dtype, const int64_t *shape, size_t ndim,
                                  void *out) {
  uint64_t state = genie_seed_fnv1a64(name);
  size_t n = genie_seed_count(shape, ndim);
  double scale = (ndim > 0 && shape[ndim - 1] > 0) ? 1.0 / sqrt((double)shape[ndim - 1]) : 1.0;
  size_t i;
  for (i = 0; i < n; ++i) {
    uint64_t r = genie_seed_next(&state);
    float f = (float)((((double)(r >> 40) / 16777216.0) * 2.0 - 1.0) * scale);
    switch (dtype) {
      case GENIE_DTYPE_F32:
        ((float *)out)[i] = f;
        break;
      case GENIE_DTYPE_F16:
        ((uint16_t *)out)[i] = genie_seed_f32_to_f16(f);
        break;
      case GENIE_DTYPE_BF16:
        ((uint16_t *)out)[i] = genie_seed_f32_to_bf16(f);
        break;
      case GENIE_DTYPE_I32:
        ((int32_t *)out)[i] = (int32_t)(r % 16);
        break;
      case GENIE_DTYPE_I64:
        ((int64_t *)out)[i] = (int64_t)(r % 16);
        break;
      case GENIE_DTYPE_BOOL:
        ((uint8_t *)out)[i] = (uint8_t)(r & 1);
        break;
      default:
        return -1;
    }
  }
  return 0;
}

/* The checksum of `count` elements of dtype at `data` (see the top). */
static inline double genie_checksum(genie_dtype_t dtype, const void *data, size_t count) {
  double sum = 0.0;
  size_t i;
  for (i = 0; i < count; ++i) {
    switch (dtype) {
      case GENIE_DTYPE_F32:
        sum += (double)((const float *)data)[i];
        break;
      case GENIE_DTYPE_F16:
        sum += (double)genie_seed_f16_to_f32(((const uint16_t *)data)[i]);
        break;
      case GENIE_DTYPE_BF16:
        sum += (double)genie_seed_bf16_to_f32(((const uint16_t *)data)[i]);
        break;
      case GENIE_DTYPE_I32:
        sum += (double)((const int32_t *)data)[i];
        break;
      case GENIE_DTYPE_I64:
        sum += (double)((const int64_t *)data)[i];
        break;
      case GENIE_DTYPE_BOOL:
        sum += (double)((const uint8_t *)data)[i];
        break;
      default:
        return NAN;
    }
  }
  return sum;
}

/* Allocates a tensor on the context's default device (host memory when
 * embedded, the server when remote) with the declared dtype and shape of graph
 * input `name` (which must be fully static) and writes its seeded values.
 * On failure returns the status (genie_last_error() has the detail, or
 * the status alone for a dynamic shape) and leaves *out untouched. */
static inline genie_status_t genie_seed_tensor(genie_context_t *ctx, const genie_graph_t *graph,
                                               const char *name, genie_tensor_t **out) {
  genie_dtype_t dtype;
  int64_t shape[GENIE_MAX_DIMS];
  size_t ndim, i, nbytes;
  genie_tensor_t *t = NULL;
  void *buf;
  genie_status_t st = genie_graph_value_info(graph, name, &dtype, shape, &ndim);
  if (st != GENIE_OK) return st;
  for (i = 0; i < ndim; ++i)
    if (shape[i] < 0) return GENIE_ERR_SHAPE_MISMATCH;
  nbytes = genie_seed_count(shape, ndim) * genie_dtype_size(dtype);
  buf = malloc(nbytes ? nbytes : 1);
  if (!buf) return GENIE_ERR_OUT_OF_MEMORY;
  genie_seed_fill(name, dtype, shape, ndim, buf);
  st = genie_tensor_alloc(ctx, dtype, shape, ndim, NULL, &t); /* the context's default device */
  if (st == GENIE_OK) st = genie_tensor_write(t, 0, buf, nbytes);
  free(buf);
  if (st != GENIE_OK) {
    genie_tensor_destroy(t);
    return st;
  }
  *out = t;
  return GENIE_OK;
}

#endif /* GENIE_SEED_H */
