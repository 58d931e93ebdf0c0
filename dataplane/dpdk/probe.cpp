#include "dataplane/dpdk/probe.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "dataplane/child_probe.hpp"
#include "dataplane/registry.hpp"

namespace genie {

DpdkProbe dpdk_not_probed(const std::string& why) {
  DpdkProbe p;
  p.reason = why;
  return p;
}

namespace {

struct DpdkChildResult {
  int32_t stage;  // 0 libraries missing, 1 EAL init failed, 2 ok
  int32_t ports;
  int32_t gpus;
  int32_t gpudev_lib;
  char detail[256];
};

[[noreturn]] void dpdk_child(int out_fd) {
  DpdkChildResult r{};
  // EAL talks on stdout/stderr: keep it off the parent's terminal.
  const int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO);
  }
  void* eal = dlopen("librte_eal.so.23", RTLD_NOW | RTLD_GLOBAL);
  void* eth = eal ? dlopen("librte_ethdev.so.23", RTLD_NOW | RTLD_GLOBAL) : nullptr;
  void* gpu = eal ? dlopen("librte_gpudev.so.23", RTLD_NOW | RTLD_GLOBAL) : nullptr;
  int (*init)(int, char**) = nullptr;
  uint16_t (*count)() = nullptr;
  uint16_t (*gpu_count)() = nullptr;
  if (!eal || !eth || !probe_symbol(eal, "rte_eal_init", init) || !probe_symbol(eth, "rte_eth_dev_count_avail", count)) {
    const char* e = dlerror();
    std::snprintf(r.detail, sizeof r.detail, "DPDK 22.11 libraries not loaded (%s)",
                  e ? e : "librte_eal.so.23 / librte_ethdev.so.23");
  } else {
    r.gpudev_lib = gpu && probe_symbol(gpu, "rte_gpu_count_avail", gpu_count);
    cpu_set_t set;
    int cpu = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) {
          cpu = c;
          break;
        }
    char lcore[16];
    std::snprintf(lcore, sizeof lcore, "%d", cpu);
    char a0[] = "genie-dpdk-probe", a1[] = "-l", a3[] = "--no-huge", a4[] = "--no-shconf",
         a5[] = "--no-telemetry", a6[] = "--log-level=*:error";
    char* argv[] = {a0, a1, lcore, a3, a4, a5, a6, nullptr};
    if (init(7, argv) < 0) {
      r.stage = 1;
      std::snprintf(r.detail, sizeof r.detail,
                    "rte_eal_init failed (no hugepages, no permission, or no usable CPU)");
    } else {
      r.stage = 2;
      r.ports = count();
      r.gpus = gpu_count ? gpu_count() : 0;
      // EAL made its runtime directory even with --no-shconf (empty then):
      // removed unless another process has files there.
      const char* (*runtime_dir)() = nullptr;
      if (probe_symbol(eal, "rte_eal_get_runtime_dir", runtime_dir) && runtime_dir() != nullptr) rmdir(runtime_dir());
    }
  }
  ssize_t ignored = write(out_fd, &r, sizeof r);
  (void)ignored;
  _exit(0);
}

}  // namespace

DpdkProbe probe_dpdk(int64_t timeout_ms) {
  using Clock = std::chrono::steady_clock;
  DpdkProbe p;
  p.probed = true;
  const auto t0 = Clock::now();
  const ChildReport c = run_child_probe(timeout_ms, [](int fd) { dpdk_child(fd); });
  p.probe_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!c.error.empty()) {
    p.reason = c.error;
    return p;
  }
  DpdkChildResult r{};
  if (c.bytes.size() < sizeof r) {
    p.reason = !c.finished ? cat("the DPDK probe did not finish within ", timeout_ms, " ms")
                           : "the DPDK probe process died before reporting";
    return p;
  }
  std::memcpy(&r, c.bytes.data(), sizeof r);
  r.detail[sizeof r.detail - 1] = '\0';
  p.gpudev_lib = r.gpudev_lib != 0;
  if (r.stage < 2) {
    p.reason = r.detail;
    return p;
  }
  p.eal_ok = true;
  p.ports = r.ports;
  p.gpus = r.gpus;
  p.reason = cat("EAL initialised; ", r.ports, " ethdev port(s); ", r.gpus, " gpudev device(s)");
  return p;
}

std::string dpdk_plugin_status() {
  std::string dirs;
  for (const std::string& dir : dataplane::transport_search_path()) {
    const std::string path = dir + "/" + dataplane::plugin_file_name("dpdk");
    if (::access(path.c_str(), F_OK) == 0)
      return cat("installed (", path, "); its port comes from GENIE_DPDK_EAL, e.g. --vdev=net_memif0,...");
    dirs += (dirs.empty() ? "" : ", ") + dir;
  }
  return cat("not installed: no ", dataplane::plugin_file_name("dpdk"), " in ", dirs,
             " (it is built only where pkg-config finds libdpdk)");
}

}  // namespace genie
