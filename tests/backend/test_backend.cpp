// The "test" device backend: a plugin (libgenie_backend_test.so) offering
// fake devices test:0 .. test:N-1 whose memory is host memory marked as
// device memory, so that every path for memory host code cannot reach
// (copies through the backend, transfers between devices, the executor's
// device runs) is exercised on a machine without an accelerator.
//
// Kernels are the built-in CPU kernels the loader hands over
// (BackendHost::cpu_kernel), called through one trampoline that first
// checks every tensor lives on the device the kernel was issued for, and
// counts the kernels each device ran (genie_test_backend_kernels), so that
// a test can tell where a plan really ran its nodes, and records the thread
// that issued each device's last kernel (genie_test_backend_last_issuer).
//
// Environment, read when the backend is created:
//   GENIE_TEST_BACKEND_DEVICES  number of devices (default 2; 0 = none,
//                               create() then fails with a reason)
//   GENIE_TEST_BACKEND_MEMORY   bytes of memory per device (default 1 GiB);
//                               allocations beyond it fail OUT_OF_MEMORY
// and, read at each call, GENIE_TEST_BACKEND_SYNC_MS: milliseconds a queue's
// synchronize() takes (a device still busy with the work issued on it).
//
// Built with -Wl,--no-undefined against the headers only: a plugin needs
// nothing of libgenie but what BackendHost passes.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "exec/backend.hpp"

namespace {

using namespace genie;

constexpr int kMaxDevices = 8;

const BackendHost* g_host = nullptr;
std::atomic<uint64_t> g_kernels[kMaxDevices];
std::atomic<uint64_t> g_live[kMaxDevices];
std::atomic<long> g_issuer[kMaxDevices];

std::string device_name(int d) { return "test:" + std::to_string(d); }

class TestQueue final : public Queue {
 public:
  explicit TestQueue(int device) : device_(device) {}
  int device() const override { return device_; }
  // Work is done when issued; a real stream would wait here. A device busy
  // with earlier work: GENIE_TEST_BACKEND_SYNC_MS, read at each call.
  void synchronize() override {
    const char* ms = std::getenv("GENIE_TEST_BACKEND_SYNC_MS");
    if (ms != nullptr && *ms != '\0') std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
  }

 private:
  int device_;
};

// Every tensor of a kernel call must be memory of the device it runs on.
void check_on(const TensorData* t, int device, const std::string& op) {
  if (t == nullptr) return;
  const Device& d = t->device();
  check(t->memory() == MemoryKind::Device && d.kind == "test" && d.index == device && d.node.empty(),
        GENIE_ERR_INTERNAL, "test backend: a kernel '", op, "' issued on ", device_name(device),
        " was given a tensor of ", d.kind, ":", d.index);
}

void run_kernel(const KernelArgs& a) {
  check(a.queue != nullptr, GENIE_ERR_INTERNAL, "test backend: kernel '", a.op, "' issued without a queue");
  const int dev = a.queue->device();
  for (const TensorData* t : a.in) check_on(t, dev, a.op);
  for (const TensorData* t : a.out) check_on(t, dev, a.op);
  KernelFn fn = g_host->cpu_kernel(a.op);
  check(fn != nullptr, GENIE_ERR_UNSUPPORTED, "test backend: no kernel for op '", a.op, "'");
  fn(a);
  g_issuer[dev].store(static_cast<long>(::gettid()));
  g_kernels[dev].fetch_add(1);
}

class TestBackend final : public DeviceBackend {
 public:
  TestBackend(int n, uint64_t capacity) : capacity_(capacity) {
    for (int i = 0; i < n; ++i) {
      DeviceDesc d;
      d.id.kind = kind_;
      d.id.index = i;
      d.memory = MemoryKind::Device;
      d.capacity_bytes = capacity;
      d.description = "test device (host memory)";
      devices_.push_back(std::move(d));
    }
  }

  const std::string& kind() const override { return kind_; }
  // As the CUDA backend's, whose embedding checks its ids on the device.
  bool kernel_waits(const std::string& op) const override { return op == "embedding"; }
  const std::vector<DeviceDesc>& devices() const override { return devices_; }

  Buffer allocate(int device, size_t bytes) override {
    check_index(device);
    const size_t size = ((bytes + 63) / 64) * 64 + 64;
    const uint64_t now = g_live[device].fetch_add(size) + size;
    if (now > capacity_) {
      g_live[device].fetch_sub(size);
      fail(GENIE_ERR_OUT_OF_MEMORY, "test backend: ", device_name(device), " has ", capacity_,
           " bytes; cannot allocate ", bytes, " more");
    }
    void* p = std::aligned_alloc(64, size);
    if (p == nullptr) {
      g_live[device].fetch_sub(size);
      fail(GENIE_ERR_OUT_OF_MEMORY, "test backend: out of host memory");
    }
    Device id;
    id.kind = kind_;
    id.index = device;
    return Buffer(static_cast<std::byte*>(p), size, MemoryKind::Device, id, [device, size](std::byte* q) {
      g_live[device].fetch_sub(size);
      std::free(q);
    });
  }

  Buffer allocate_pinned(size_t bytes) override {
    const size_t size = ((bytes + 63) / 64) * 64 + 64;
    void* p = std::aligned_alloc(64, size);
    if (p == nullptr) fail(GENIE_ERR_OUT_OF_MEMORY, "test backend: out of host memory");
    return Buffer(static_cast<std::byte*>(p), size, MemoryKind::PinnedHost, Device{}, {});
  }

  void fill_zero(Buffer& dst, size_t n, Queue*) override {
    std::memset(mine(dst, 0, n, "destination"), 0, n);
  }

  void copy_from_host(const void* src, Buffer& dst, size_t offset, size_t n, Queue*) override {
    if (n) std::memcpy(mine(dst, offset, n, "destination"), src, n);
  }

  void copy_to_host(const Buffer& src, size_t offset, void* dst, size_t n, Queue*) override {
    if (n) std::memcpy(dst, mine(src, offset, n, "source"), n);
  }

  void copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t n,
                   Queue*) override {
    if (n) std::memmove(mine(dst, dst_offset, n, "destination"), mine(src, src_offset, n, "source"), n);
  }

  KernelFn find_kernel(const std::string& op) const override {
    return g_host->cpu_kernel(op) != nullptr ? &run_kernel : nullptr;
  }

  void convert(const TensorData& src, TensorData& dst, Queue*) override {
    check(src.numel() == dst.numel(), GENIE_ERR_INTERNAL, "test backend: convert of ", src.numel(),
          " elements into ", dst.numel());
    std::byte* from = mine(src.buffer(), 0, src.nbytes(), "source");
    std::byte* to = mine(dst.buffer(), 0, dst.nbytes(), "destination");
    g_host->convert_elements(from, src.dtype(), to, dst.dtype(), src.numel());
  }

  std::unique_ptr<Queue> create_queue(int device) override {
    check_index(device);
    return std::make_unique<TestQueue>(device);
  }

  void synchronize(int device) override { check_index(device); }

  // Fixed figures (nothing to measure): a device ten times the GEMM rate
  // of a small CPU, so that plans use it.
  sched::DeviceProfile calibrate(int device, const sched::CalibrateOptions& opts) override {
    check_index(device);
    sched::DeviceProfile p;
    p.node_id = opts.node_id;
    p.device = device_name(device);
    p.peak_flops = 1e12;
    p.vector_flops = 1e11;
    p.mem_bw_bytes_per_s = 1e11;
    p.mem_capacity_bytes = capacity_;
    p.mem_budget_bytes = static_cast<uint64_t>(static_cast<double>(capacity_) * opts.budget_fraction);
    p.op_overhead_s = 5e-6;
    return p;
  }

 private:
  void check_index(int device) const {
    check(device >= 0 && static_cast<size_t>(device) < devices_.size(), GENIE_ERR_INVALID_ARGUMENT,
          "device test:", device, " does not exist (the test backend has ", devices_.size(), " device(s))");
  }
  // The bytes of `b` at [offset, offset + n), which must be this backend's.
  std::byte* mine(const Buffer& b, size_t offset, size_t n, const char* what) const {
    check(b.memory() == MemoryKind::Device && b.device().kind == kind_, GENIE_ERR_INTERNAL,
          "test backend: the ", what, " is not test device memory but ", b.device().kind, ":",
          b.device().index);
    check(offset <= b.size() && n <= b.size() - offset, GENIE_ERR_INTERNAL, "test backend: ", what,
          " range [", offset, ", +", n, ") exceeds its ", b.size(), " bytes");
    return b.data() + offset;
  }

  std::string kind_ = "test";
  std::vector<DeviceDesc> devices_;
  uint64_t capacity_;
};

long env_long(const char* name, long dflt) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return dflt;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return end && *end == '\0' ? x : -1;
}

DeviceBackend* create(const BackendHost* host, char* why, size_t why_size) {
  const auto refuse = [&](const std::string& s) -> DeviceBackend* {
    if (why_size) {
      std::strncpy(why, s.c_str(), why_size - 1);
      why[why_size - 1] = '\0';
    }
    return nullptr;
  };
  if (host == nullptr || host->abi_version != kDeviceBackendAbi || host->cpu_kernel == nullptr ||
      host->convert_elements == nullptr)
    return refuse("the host library offers no CPU kernels of this ABI version");
  const long n = env_long("GENIE_TEST_BACKEND_DEVICES", 2);
  if (n <= 0 || n > kMaxDevices)
    return refuse("GENIE_TEST_BACKEND_DEVICES must be 1.." + std::to_string(kMaxDevices) + " (no devices)");
  const long mem = env_long("GENIE_TEST_BACKEND_MEMORY", 1l << 30);
  if (mem <= 0) return refuse("GENIE_TEST_BACKEND_MEMORY must be a positive number of bytes");
  g_host = host;
  try {
    return new TestBackend(static_cast<int>(n), static_cast<uint64_t>(mem));
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
}

const DeviceBackendEntry kEntry{kDeviceBackendAbi, "test", &create};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const genie::DeviceBackendEntry* genie_device_backend_entry() {
  return &kEntry;
}

// Kernels run on test:`device` since the plugin loaded (tests read it with
// dlsym).
__attribute__((visibility("default"))) uint64_t genie_test_backend_kernels(int device) {
  return device >= 0 && device < kMaxDevices ? g_kernels[device].load() : 0;
}

// The thread id (gettid) that issued the last kernel on test:`device`, or 0.
__attribute__((visibility("default"))) long genie_test_backend_last_issuer(int device) {
  return device >= 0 && device < kMaxDevices ? g_issuer[device].load() : 0;
}

// Bytes of test:`device` memory allocated now.
__attribute__((visibility("default"))) uint64_t genie_test_backend_live_bytes(int device) {
  return device >= 0 && device < kMaxDevices ? g_live[device].load() : 0;
}
}
