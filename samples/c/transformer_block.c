/*
 * sample_transformer_block — one GPT-2 transformer block (batch 1, hidden
 * 768, 12 heads, MLP 3072) built through the Genie C API, run in-process
 * with resident weights, and checked with the checksum that `genie run`
 * prints for the same graph exported as JSON.
 *
 *   sample_transformer_block [--seq S] [--repeat N]   run it (S = 128, N = 10)
 *   sample_transformer_block [--seq S] --json OUT     write the graph as JSON
 *
 * Inputs and weights hold the seeded values of genie_seed.h (a function of
 * each input's name), so the checksum is reproducible anywhere.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <genie.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <genie_seed.h>
#include "transformer_block_graph.h"

static const char *prog = "sample_transformer_block";

static void usage(FILE *f) {
  fprintf(f,
          "usage: %s [--seq S] [--repeat N]    run the block, print checksum and latency\n"
          "       %s [--seq S] --json OUT      write the graph as JSON instead\n"
          "  --seq S      sequence length (default 128)\n"
          "  --repeat N   submissions to time (default 10)\n",
          prog, prog);
}

/* Reports a failed Genie call; returns the exit status for main. */
static int fail(const char *what, genie_status_t st) {
  fprintf(stderr, "%s: %s failed: %s: %s\n", prog, what, genie_status_str(st), genie_last_error());
  return 1;
}

/* Parses a positive integer option value; 0 on error. */
static long parse_positive(const char *flag, const char *text) {
  char *end = NULL;
  long v;
  errno = 0;
  v = strtol(text, &end, 10);
  if (errno || end == text || *end || v <= 0 || v > INT_MAX) {
    fprintf(stderr, "%s: %s needs a positive integer, got '%s'\n", prog, flag, text);
    return 0;
  }
  return v;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int write_json(const genie_graph_t *graph, const char *path) {
  char *json = NULL;
  size_t len = 0;
  FILE *f;
  int ok;
  genie_status_t st = genie_graph_to_json(graph, &json, &len);
  if (st != GENIE_OK) return fail("genie_graph_to_json", st);
  f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "%s: cannot write %s: %s\n", prog, path, strerror(errno));
    genie_free(json);
    return 1;
  }
  ok = fwrite(json, 1, len, f) == len;
  if (ok && (len == 0 || json[len - 1] != '\n')) ok = fputc('\n', f) != EOF;
  ok = (fclose(f) == 0) && ok;
  genie_free(json);
  if (!ok) {
    fprintf(stderr, "%s: error writing %s: %s\n", prog, path, strerror(errno));
    return 1;
  }
  printf("wrote %s\n", path);
  return 0;
}

/* Runs the graph `repeat` times with the same resident tensors, then prints
 * the output, its checksum, latency and throughput. */
static int run(const tb_dims_t *d, const genie_graph_t *graph, int repeat) {
  genie_context_t *ctx = NULL;
  genie_tensor_t *inputs[TB_NUM_INPUTS] = {NULL};
  genie_future_t *fut = NULL;
  genie_tensor_t *out = NULL;
  double *ms = NULL;
  void *host = NULL;
  genie_dtype_t dtype;
  int64_t shape[GENIE_MAX_DIMS];
  size_t ndim, nbytes, i;
  int rc = 1;
  genie_status_t st = genie_init(NULL, &ctx);
  if (st != GENIE_OK) return fail("genie_init", st);

  for (i = 0; i < TB_NUM_INPUTS; ++i) {
    st = genie_seed_tensor(ctx, graph, tb_input_names[i], &inputs[i]);
    if (st != GENIE_OK) {
      char what[320];
      snprintf(what, sizeof what, "seeding input %s", tb_input_names[i]);
      rc = fail(what, st);
      goto done;
    }
  }

  ms = malloc(sizeof(double) * (size_t)repeat);
  if (!ms) {
    fprintf(stderr, "%s: out of memory\n", prog);
    goto done;
  }
  for (i = 0; i < (size_t)repeat; ++i) {
    double t0;
    genie_future_destroy(fut); /* keep only the last run's outputs */
    fut = NULL;
    t0 = now_ms();
    st = genie_graph_submit(ctx, graph, tb_input_names, inputs, TB_NUM_INPUTS, &fut);
    if (st != GENIE_OK) {
      rc = fail("genie_graph_submit", st);
      goto done;
    }
    st = genie_future_wait(fut, -1);
    if (st != GENIE_OK) {
      rc = fail("executing the graph", st);
      goto done;
    }
    ms[i] = now_ms() - t0;
  }

  st = genie_future_output_by_name(fut, TB_OUTPUT_NAME, &out);
  if (st == GENIE_OK) st = genie_tensor_info(out, &dtype, shape, &ndim, &nbytes);
  if (st != GENIE_OK) {
    rc = fail("reading the output", st);
    goto done;
  }
  host = malloc(nbytes ? nbytes : 1);
  if (!host) {
    fprintf(stderr, "%s: out of memory\n", prog);
    goto done;
  }
  st = genie_tensor_read(out, 0, host, nbytes);
  if (st != GENIE_OK) {
    rc = fail("genie_tensor_read", st);
    goto done;
  }

  printf("output %s shape [", TB_OUTPUT_NAME);
  for (i = 0; i < ndim; ++i) printf("%s%lld", i ? ", " : "", (long long)shape[i]);
  printf("] dtype %s\n", genie_dtype_name(dtype));
  printf("checksum %s %.6g\n", TB_OUTPUT_NAME, genie_checksum(dtype, host, nbytes / genie_dtype_size(dtype)));
  qsort(ms, (size_t)repeat, sizeof(double), cmp_double);
  {
    double p50 = ms[(size_t)repeat / 2];
    printf("latency p50 %.3f ms min %.3f ms (%d run%s)\n", p50, ms[0], repeat, repeat == 1 ? "" : "s");
    printf("throughput %.0f tokens/s (batch %lld x seq %lld at p50)\n",
           (double)(d->batch * d->seq) / (p50 / 1e3), (long long)d->batch, (long long)d->seq);
  }
  rc = 0;

done:
  free(host);
  free(ms);
  genie_tensor_destroy(out);
  genie_future_destroy(fut);
  for (i = 0; i < TB_NUM_INPUTS; ++i) genie_tensor_destroy(inputs[i]);
  genie_shutdown(ctx);
  return rc;
}

int main(int argc, char **argv) {
  const char *json_path = NULL;
  long seq = 128, repeat = 10;
  tb_dims_t dims;
  genie_graph_t *graph = NULL;
  genie_status_t st;
  int i, rc;

  for (i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    if (strcmp(a, "--json") != 0 && strcmp(a, "--seq") != 0 && strcmp(a, "--repeat") != 0) {
      fprintf(stderr, "%s: unknown argument '%s'\n", prog, a);
      usage(stderr);
      return 2;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "%s: %s needs a value\n", prog, a);
      return 2;
    }
    if (!strcmp(a, "--json")) {
      json_path = argv[++i];
    } else if (!strcmp(a, "--seq")) {
      if (!(seq = parse_positive(a, argv[++i]))) return 2;
    } else if (!(repeat = parse_positive(a, argv[++i]))) {
      return 2;
    }
  }

  dims = tb_gpt2_dims(seq);
  st = tb_build_graph(&dims, &graph);
  if (st != GENIE_OK) return fail("building the graph", st);
  if (json_path) {
    rc = write_json(graph, json_path);
  } else {
    printf("GPT-2 block: batch %lld, seq %lld, hidden %lld, %lld heads, MLP %lld (Genie %s)\n",
           (long long)dims.batch, (long long)dims.seq, (long long)dims.hidden, (long long)dims.heads,
           (long long)dims.mlp, genie_version_string());
    rc = run(&dims, graph, (int)repeat);
  }
  genie_graph_destroy(graph);
  return rc;
}
