/*
 * bench_cuda_copy — host <-> device copies through Genie (genie_tensor_write
 * and genie_tensor_read of a cuda:0 tensor from pageable host memory)
 * against cudaMemcpy of the same pageable buffer and size, interleaved A/B;
 * cudaMemcpy from pinned memory is printed beside them as the link's limit.
 * The ratio is cudaMemcpy time / Genie time; the goal is >= 0.90.
 *
 * Without a GPU it says why and exits 0 (docs/cuda.md).
 */
#include "cuda_bench.h"

static const size_t full_sizes[] = {(size_t)1 << 20, (size_t)16 << 20, (size_t)256 << 20};

int main(int argc, char **argv) {
  bu_options_t opt = bu_parse_args(argc, argv, ", A/B pairs (default 11; --quick: 3)");
  static const size_t quick_sizes[] = {(size_t)1 << 20};
  const size_t *sizes = opt.quick ? quick_sizes : full_sizes;
  size_t n_sizes = opt.quick ? 1 : sizeof full_sizes / sizeof *full_sizes, si;
  int pairs = opt.iters ? opt.iters : (opt.quick ? 3 : 11), dir, first = 1, failed = 0;
  genie_context_t *ctx = NULL;
  FILE *json;

  bu_check(genie_init(NULL, &ctx), "genie_init");
  cb_require_gpu("bench_cuda_copy", ctx, opt.json_path);
  json = bu_json_open(opt.json_path);
  cb_print_gpu();
  printf("host<->device copies of pageable memory: Genie tensor write/read on cuda:0 vs cudaMemcpy\n");
  printf("%d interleaved pairs per size; ratio = cudaMemcpy time / Genie time (goal >= 0.90); pinned = limit\n\n",
         pairs);
  printf("%-4s %10s  %-12s %-12s %-12s %s\n", "dir", "bytes", "Genie GB/s", "memcpy GB/s", "pinned GB/s",
         "ratio med (min-max)");
  if (json) fprintf(json, "{\"benchmark\": \"cuda_copy\", \"quick\": %s, \"pairs\": %d, \"results\": [",
                    opt.quick ? "true" : "false", pairs);
  for (si = 0; si < n_sizes; ++si) {
    const size_t n = sizes[si];
    const int64_t shape[1] = {(int64_t)n};
    genie_tensor_t *t = NULL;
    unsigned char *host = bu_malloc(n), *pinned = NULL;
    void *dev = NULL;
    size_t i;
    for (i = 0; i < n; ++i) host[i] = (unsigned char)(i * 7);
    bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_BOOL, shape, 1, "cuda:0", &t), "alloc on cuda:0");
    cb_cuda(cudaMalloc(&dev, n), "cudaMalloc");
    cb_cuda(cudaMallocHost((void **)&pinned, n), "cudaMallocHost");
    for (dir = 0; dir < 2; ++dir) { /* 0: host to device, 1: device to host */
      double *ratio = bu_malloc(sizeof(double) * (size_t)pairs), *g = bu_malloc(sizeof(double) * (size_t)pairs);
      double *d = bu_malloc(sizeof(double) * (size_t)pairs), *pl = bu_malloc(sizeof(double) * (size_t)pairs);
      bu_stats_t rs, gs, ds, ps;
      int p;
      for (p = -1; p < pairs; ++p) { /* p = -1: warm-up */
        double t0 = bu_now_s(), tg, td, tp;
        if (dir == 0)
          bu_check(genie_tensor_write(t, 0, host, n), "genie_tensor_write");
        else
          bu_check(genie_tensor_read(t, 0, host, n), "genie_tensor_read");
        tg = bu_now_s() - t0;
        t0 = bu_now_s();
        cb_cuda(cudaMemcpy(dir == 0 ? dev : (void *)host, dir == 0 ? (void *)host : dev, n,
                           dir == 0 ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost),
                "cudaMemcpy");
        td = bu_now_s() - t0;
        t0 = bu_now_s();
        cb_cuda(cudaMemcpy(dir == 0 ? dev : (void *)pinned, dir == 0 ? (void *)pinned : dev, n,
                           dir == 0 ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost),
                "cudaMemcpy (pinned)");
        tp = bu_now_s() - t0;
        if (p < 0) continue;
        g[p] = (double)n / tg * 1e-9;
        d[p] = (double)n / td * 1e-9;
        pl[p] = (double)n / tp * 1e-9;
        ratio[p] = td / tg;
      }
      rs = bu_stats(ratio, (size_t)pairs);
      gs = bu_stats(g, (size_t)pairs);
      ds = bu_stats(d, (size_t)pairs);
      ps = bu_stats(pl, (size_t)pairs);
      printf("%-4s %10zu  %-12.2f %-12.2f %-12.2f %5.3f (%5.3f-%5.3f)\n", dir == 0 ? "H2D" : "D2H", n, gs.median,
             ds.median, ps.median, rs.median, rs.min, rs.max);
      if (json)
        fprintf(json,
                "%s\n  {\"direction\": \"%s\", \"bytes\": %zu, \"genie_gbs\": %.4g, \"memcpy_gbs\": %.4g, "
                "\"pinned_gbs\": %.4g, \"ratio\": {\"median\": %.4g, \"min\": %.4g, \"max\": %.4g}}",
                first ? "" : ",", dir == 0 ? "H2D" : "D2H", n, gs.median, ds.median, ps.median, rs.median, rs.min,
                rs.max);
      first = 0;
      free(ratio), free(g), free(d), free(pl);
    }
    /* The bytes went through: what was written reads back. */
    {
      unsigned char *back = bu_malloc(n);
      for (i = 0; i < n; ++i) host[i] = (unsigned char)(i * 13 + 1);
      bu_check(genie_tensor_write(t, 0, host, n), "genie_tensor_write");
      bu_check(genie_tensor_read(t, 0, back, n), "genie_tensor_read");
      if (memcmp(back, host, n) != 0) failed = 1;
      free(back);
    }
    genie_tensor_destroy(t);
    cudaFree(dev);
    cudaFreeHost(pinned);
    free(host);
  }
  if (json) fprintf(json, "\n]}\n");
  bu_json_close(json, opt.json_path);
  genie_shutdown(ctx);
  if (failed) fprintf(stderr, "bench_cuda_copy: bytes read back differ from those written\n");
  return failed;
}
