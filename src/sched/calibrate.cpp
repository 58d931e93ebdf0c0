// calibrate_local_cpu: a short sgemm and memcpy measurement, cached on disk.
#include <cblas.h>
#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "exec/cpu/vec_math.hpp"  // header-only: the CPU kernels' own vectorised math
#include "sched/plan.hpp"

namespace genie::sched {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t b = line.find_first_not_of(" \t", colon + 1);
        return b == std::string::npos ? "" : line.substr(b);
      }
    }
  return "unknown";
}

std::string cache_directory(const CalibrateOptions& o) {
  if (!o.cache_dir.empty()) return o.cache_dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/genie";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/genie";
  return "";
}

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
}

// Best of several sgemm runs: FLOP/s.
double measure_sgemm() {
  const int n = 256;
  std::vector<float> a(static_cast<size_t>(n) * n, 1.0f), b(a.size(), 0.5f), c(a.size(), 0.0f);
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {
    const double t0 = now_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double dt = now_s() - t0;
    if (rep > 0) best = std::min(best, dt);  // the first run warms up the threads
  }
  check(c[0] == 0.5f * n, GENIE_ERR_INTERNAL, "calibration sgemm gave a wrong result");
  return 2.0 * n * n * n / std::max(best, 1e-9);
}

// Best of two 16 MiB copies after a first one that also faults the
// destination in (32 MiB touched: beyond the share of the last-level cache
// a process keeps on most machines, as the weights a model streams are once
// other work has run): bytes read + written per second.
double measure_memcpy() {
  const size_t bytes = size_t{16} << 20;
  std::vector<char> src(bytes, 1);
  std::unique_ptr<char[]> dst(new char[bytes]);  // uninitialised: the first copy writes it
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    src[static_cast<size_t>(rep)] = static_cast<char>(rep);
    const double t0 = now_s();
    std::memcpy(dst.get(), src.data(), bytes);
    const double dt = now_s() - t0;
    if (rep > 0) best = std::min(best, dt);
  }
  check(dst[2] == 2, GENIE_ERR_INTERNAL, "calibration memcpy gave a wrong result");
  return 2.0 * static_cast<double>(bytes) / std::max(best, 1e-9);
}

// The rate element-wise kernels reach, in the cost model's FLOPs: the CPU
// kernels' tanh-approximated GELU (8 model FLOPs per element, cost.cpp) over
// a buffer that stays in cache, so the figure is compute, not memory; best
// of several passes.
double measure_vector() {
  const size_t n = 16384;
  std::vector<float> x(n), y(n, 0.0f);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 97) * 0.05f - 2.0f;
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {
    const double t0 = now_s();
    for (size_t i = 0; i + 4 <= n; i += 4) {
      cpu::vec::F4 v;
      std::memcpy(&v, x.data() + i, sizeof v);
      v = cpu::vec::gelu_tanh(v);
      std::memcpy(y.data() + i, &v, sizeof v);
    }
    const double dt = now_s() - t0;
    if (rep > 0) best = std::min(best, dt);
  }
  check(std::isfinite(y[n - 1]) && y[0] < 0.0f && y[0] > -0.2f, GENIE_ERR_INTERNAL,
        "calibration element-wise pass gave a wrong result");
  return 8.0 * static_cast<double>(n) / std::max(best, 1e-9);
}

uint64_t available_memory(uint64_t* capacity) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  *capacity = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return *capacity;
}

// Version of the cache file's format; a file of another version is measured
// again and rewritten (2, 3: vector_flops added, memcpy beyond the last-level
// cache).
constexpr int kCacheVersion = 3;

bool read_cache(const std::string& file, const std::string& model, unsigned cores, double* flops, double* vec,
                double* bw) {
  std::ifstream in(file);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  cJSON* root = cJSON_ParseWithLength(text.data(), text.size());
  if (!root) return false;
  bool ok = false;
  const cJSON* ver = cJSON_GetObjectItemCaseSensitive(root, "version");
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(root, "vector_flops");
  const cJSON* m = cJSON_GetObjectItemCaseSensitive(root, "cpu_model");
  const cJSON* c = cJSON_GetObjectItemCaseSensitive(root, "cores");
  const cJSON* f = cJSON_GetObjectItemCaseSensitive(root, "peak_flops");
  const cJSON* b = cJSON_GetObjectItemCaseSensitive(root, "mem_bw_bytes_per_s");
  if (cJSON_IsNumber(ver) && ver->valuedouble == kCacheVersion && cJSON_IsNumber(v) && v->valuedouble > 0 &&
      cJSON_IsString(m) && model == m->valuestring && cJSON_IsNumber(c) && c->valuedouble == cores &&
      cJSON_IsNumber(f) && f->valuedouble > 0 && cJSON_IsNumber(b) && b->valuedouble > 0) {
    *flops = f->valuedouble;
    *vec = v->valuedouble;
    *bw = b->valuedouble;
    ok = true;
  }
  cJSON_Delete(root);
  return ok;
}

void write_cache(const std::string& dir, const std::string& file, const std::string& model, unsigned cores,
                 double flops, double vec, double bw) {
  make_dirs(dir);
  cJSON* root = cJSON_CreateObject();
  if (!root) return;
  cJSON_AddNumberToObject(root, "version", kCacheVersion);
  cJSON_AddStringToObject(root, "cpu_model", model.c_str());
  cJSON_AddNumberToObject(root, "cores", cores);
  cJSON_AddNumberToObject(root, "peak_flops", flops);
  cJSON_AddNumberToObject(root, "vector_flops", vec);
  cJSON_AddNumberToObject(root, "mem_bw_bytes_per_s", bw);
  char* text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) return;
  // Written aside and renamed, so a concurrent reader never sees half a file.
  const std::string tmp = file + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text << "\n";
    if (!out) {
      cJSON_free(text);
      std::remove(tmp.c_str());
      return;
    }
  }
  cJSON_free(text);
  if (std::rename(tmp.c_str(), file.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace

DeviceProfile calibrate_local_cpu(const CalibrateOptions& opts) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::string model = cpu_model();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  uint64_t key = 0xcbf29ce484222325ull;
  for (unsigned char ch : model + "/" + std::to_string(cores)) key = (key ^ ch) * 0x100000001b3ull;
  char name[40];
  std::snprintf(name, sizeof name, "cpu-%016llx.json", static_cast<unsigned long long>(key));
  const std::string dir = cache_directory(opts);
  const std::string file = dir.empty() ? "" : dir + "/" + name;

  double flops = 0, vec = 0, bw = 0;
  if (!opts.use_cache || file.empty() || !read_cache(file, model, cores, &flops, &vec, &bw)) {
    // Whole units, so the cached text round-trips exactly.
    flops = std::round(measure_sgemm());
    vec = std::round(measure_vector());
    bw = std::round(measure_memcpy());
    if (opts.use_cache && !file.empty()) write_cache(dir, file, model, cores, flops, vec, bw);
  }
  DeviceProfile d;
  d.node_id = opts.node_id;
  d.device = "cpu:0";
  d.peak_flops = flops;
  d.vector_flops = vec;
  d.mem_bw_bytes_per_s = bw;
  const uint64_t avail = available_memory(&d.mem_capacity_bytes);
  const double frac = std::clamp(opts.budget_fraction, 0.01, 1.0);
  d.mem_budget_bytes = static_cast<uint64_t>(static_cast<double>(std::min(avail, d.mem_capacity_bytes)) * frac);
  d.op_overhead_s = 2e-6;
  return d;
}

}  // namespace genie::sched
