// Local GPUs through NVML, loaded at run time: libnvidia-ml.so.1, or the
// library named by GENIE_NVML_LIBRARY (tests load their own NVML there).
// No library, no driver or no GPU gives zero GPUs and the reason; it is
// never an error.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cluster/types.hpp"

namespace genie {

constexpr uint32_t kGpuBusyPercent = 90;  // above: GPU_UNAVAILABLE
constexpr int32_t kGpuHotCelsius = 85;    // above: GPU_OVERHEATED

// A GPU event found by a poll: type is a GENIE_EVENT_GPU_* bit.
struct GpuEvent {
  uint32_t type;
  GpuInfo gpu;
};

class GpuMonitor {
 public:
  GpuMonitor();  // loads and initialises NVML (cheap when it is absent)
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  // Reads every GPU; returns the events since the last poll: AVAILABLE or
  // UNAVAILABLE for a GPU seen for the first time and on every crossing of
  // 90 % utilisation, OVERHEATED when the temperature crosses above 85 C.
  std::vector<GpuEvent> poll();
  const std::vector<GpuInfo>& gpus() const { return gpus_; }
  // Why there are no GPUs, or why the last poll failed ("" when fine).
  const std::string& reason() const { return reason_; }
  bool nvml_loaded() const { return lib_ != nullptr; }
  // NVML worked and then failed ("" when fine): a health finding, unlike
  // having no NVML at all.
  const std::string& poll_error() const { return poll_error_; }
  // The library that was loaded (or tried).
  const std::string& library() const { return library_; }

 private:
  struct Fns;
  void* lib_ = nullptr;
  Fns* fns_ = nullptr;
  bool inited_ = false;
  std::string library_;
  std::string reason_;
  std::string poll_error_;
  std::vector<GpuInfo> gpus_;
  bool first_ = true;
  // This process's GPUs by bus id, read once when NVML first reports one.
  std::vector<std::pair<std::string, std::string>> locals_;
  bool locals_loaded_ = false;
};

// "0000:65:00.0" from any spelling of a PCI address NVML or CUDA gives
// ("00000000:65:00.0", "0000:65:00.0", upper or lower case); "" if it is none.
std::string normalize_pci_bus_id(const std::string& text);
// The bus id in a CUDA device's description ("NVIDIA H100 (..., PCI
// 0000:65:00.0)", exec/cuda/backend.cpp), normalised; "" if it has none.
std::string pci_bus_id_of(const std::string& description);
// This process's CUDA devices as (bus id, "cuda:N"), through the cuda device
// backend (loaded on first use; none when it is unavailable).
std::vector<std::pair<std::string, std::string>> local_gpu_bus_ids();

}  // namespace genie
