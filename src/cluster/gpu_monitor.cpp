#include "cluster/gpu_monitor.hpp"

#include <dlfcn.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "core/log.hpp"
#include "exec/backend_loader.hpp"

namespace genie {

// The few NVML entry points used, with their C types (ABI-stable since
// NVML 5; nvml.h is not needed).
namespace {
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlPciInfo_t {  // nvmlPciInfo_st as of NVML 11 (nvmlDeviceGetPciInfo_v3)
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
constexpr int kNvmlTemperatureGpu = 0;
constexpr int kNvmlSuccess = 0;
}  // namespace

struct GpuMonitor::Fns {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  const char* (*error_string)(nvmlReturn_t);
  nvmlReturn_t (*count)(unsigned int*);
  nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int*);
  nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;  // optional
};

namespace {
template <class F>
bool sym(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  return out != nullptr;
}
}  // namespace

GpuMonitor::GpuMonitor() {
  const char* env = std::getenv("GENIE_NVML_LIBRARY");
  library_ = env && *env ? env : "libnvidia-ml.so.1";
  lib_ = dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    const char* e = dlerror();
    reason_ = cat("NVML not loaded (", e ? e : library_, "): no NVIDIA driver here");
    return;
  }
  auto* f = new Fns();
  const char* missing = nullptr;
  if (!sym(lib_, "nvmlInit_v2", f->init)) missing = "nvmlInit_v2";
  else if (!sym(lib_, "nvmlShutdown", f->shutdown)) missing = "nvmlShutdown";
  else if (!sym(lib_, "nvmlErrorString", f->error_string)) missing = "nvmlErrorString";
  else if (!sym(lib_, "nvmlDeviceGetCount_v2", f->count)) missing = "nvmlDeviceGetCount_v2";
  else if (!sym(lib_, "nvmlDeviceGetHandleByIndex_v2", f->handle)) missing = "nvmlDeviceGetHandleByIndex_v2";
  else if (!sym(lib_, "nvmlDeviceGetName", f->name)) missing = "nvmlDeviceGetName";
  else if (!sym(lib_, "nvmlDeviceGetMemoryInfo", f->memory)) missing = "nvmlDeviceGetMemoryInfo";
  else if (!sym(lib_, "nvmlDeviceGetUtilizationRates", f->utilization)) missing = "nvmlDeviceGetUtilizationRates";
  else if (!sym(lib_, "nvmlDeviceGetTemperature", f->temperature)) missing = "nvmlDeviceGetTemperature";
  if (missing) {
    reason_ = cat(library_, " lacks ", missing);
    delete f;
    dlclose(lib_);
    lib_ = nullptr;
    return;
  }
  sym(lib_, "nvmlDeviceGetPciInfo_v3", f->pci);  // optional: readings then match no device
  fns_ = f;
  const nvmlReturn_t rc = fns_->init();
  if (rc != kNvmlSuccess) {
    reason_ = cat("nvmlInit failed: ", fns_->error_string(rc));
    return;
  }
  inited_ = true;
}

GpuMonitor::~GpuMonitor() {
  if (inited_) fns_->shutdown();
  delete fns_;
  if (lib_) dlclose(lib_);
}

std::vector<GpuEvent> GpuMonitor::poll() {
  std::vector<GpuEvent> events;
  if (!inited_) return events;
  std::vector<GpuInfo> now;
  unsigned int n = 0;
  nvmlReturn_t rc = fns_->count(&n);
  if (rc != kNvmlSuccess) {
    reason_ = cat("nvmlDeviceGetCount failed: ", fns_->error_string(rc));
    poll_error_ = reason_;
    gpus_.clear();
    return events;
  }
  reason_ = n == 0 ? "NVML reports no GPU" : "";
  poll_error_.clear();
  for (unsigned int i = 0; i < n && i < 1024; ++i) {
    nvmlDevice_t d = nullptr;
    GpuInfo g;
    g.index = i;
    if ((rc = fns_->handle(i, &d)) != kNvmlSuccess) {
      reason_ = poll_error_ = cat("GPU ", i, ": ", fns_->error_string(rc));
      continue;
    }
    char name[96] = {};
    if (fns_->name(d, name, sizeof name - 1) == kNvmlSuccess) g.name = name;
    nvmlMemory_t mem{};
    if (fns_->memory(d, &mem) == kNvmlSuccess) {
      g.memory_total = mem.total;
      g.memory_used = mem.used;
    }
    nvmlUtilization_t util{};
    if (fns_->utilization(d, &util) == kNvmlSuccess) g.utilization = util.gpu;
    unsigned int temp = 0;
    if (fns_->temperature(d, kNvmlTemperatureGpu, &temp) == kNvmlSuccess) g.temperature_c = static_cast<int32_t>(temp);
    nvmlPciInfo_t pci{};
    if (fns_->pci && fns_->pci(d, &pci) == kNvmlSuccess) {
      g.pci_bus_id = normalize_pci_bus_id(cat(std::hex, pci.domain, ":", pci.bus, ":", pci.device, ".0"));
      if (!locals_loaded_) {
        locals_ = local_gpu_bus_ids();
        locals_loaded_ = true;
      }
      for (const auto& [bus, dev] : locals_)
        if (bus == g.pci_bus_id) g.device = dev;
    }
    g.available = g.utilization <= kGpuBusyPercent;
    g.overheated = g.temperature_c > kGpuHotCelsius;
    const GpuInfo* before = nullptr;
    for (const GpuInfo& b : gpus_)
      if (b.index == i) before = &b;
    if (!before || before->available != g.available)
      events.push_back({g.available ? static_cast<uint32_t>(GENIE_EVENT_GPU_AVAILABLE)
                                    : static_cast<uint32_t>(GENIE_EVENT_GPU_UNAVAILABLE),
                        g});
    if (g.overheated && (!before || !before->overheated)) events.push_back({GENIE_EVENT_GPU_OVERHEATED, g});
    now.push_back(std::move(g));
  }
  gpus_ = std::move(now);
  first_ = false;
  return events;
}

std::string normalize_pci_bus_id(const std::string& text) {
  for (char c : text)  // hex digits and separators only (scanf would take "0x" too)
    if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return "";
  unsigned int domain = 0, bus = 0, device = 0, function = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) != 4) return "";
  if (domain > 0xffff || bus > 0xff || device > 0x1f || function > 7) return "";
  char out[16];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", domain, bus, device, function);
  return out;
}

std::string pci_bus_id_of(const std::string& description) {
  const size_t at = description.rfind("PCI ");
  if (at == std::string::npos) return "";
  const size_t end = description.find_first_of(",) ", at + 4);
  return normalize_pci_bus_id(description.substr(at + 4, end == std::string::npos ? std::string::npos : end - at - 4));
}

std::vector<std::pair<std::string, std::string>> local_gpu_bus_ids() {
  std::vector<std::pair<std::string, std::string>> r;
  const LoadedBackend& b = device_backend("cuda");
  if (!b.backend) return r;
  for (const DeviceDesc& d : b.backend->devices()) {
    std::string bus = pci_bus_id_of(d.description);
    if (!bus.empty()) r.emplace_back(std::move(bus), d.id.str());
  }
  return r;
}

}  // namespace genie
