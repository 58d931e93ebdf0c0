// NVML readings belong to the local device they describe: the GPU monitor
// reads each GPU's PCI bus id and matches it with the CUDA backend's
// devices (whose descriptions carry theirs), and both travel in the
// cluster's node status.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "cluster/gpu_monitor.hpp"
#include "cluster/types.hpp"

namespace genie {
namespace {

TEST(GpuDevices, PciBusIdsAreNormalisedFromEverySpelling) {
  EXPECT_EQ(normalize_pci_bus_id("00000000:65:00.0"), "0000:65:00.0");  // NVML
  EXPECT_EQ(normalize_pci_bus_id("0000:B3:00.0"), "0000:b3:00.0");      // cudaDeviceGetPCIBusId
  EXPECT_EQ(normalize_pci_bus_id("1:2:3.1"), "0001:02:03.1");
  EXPECT_EQ(normalize_pci_bus_id("0000:65:00"), "");
  EXPECT_EQ(normalize_pci_bus_id("0000:65:00.0x"), "");
  EXPECT_EQ(normalize_pci_bus_id("not a bus"), "");
  EXPECT_EQ(normalize_pci_bus_id("0000:165:00.0"), "");  // bus beyond a byte
}

TEST(GpuDevices, TheBusIdIsReadFromACudaDevicesDescription) {
  EXPECT_EQ(pci_bus_id_of("NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, PCI 0000:65:00.0)"), "0000:65:00.0");
  EXPECT_EQ(pci_bus_id_of("NVIDIA A100 (sm_80, 108 SMs, PCI 0000:B3:00.0)"), "0000:b3:00.0");
  EXPECT_EQ(pci_bus_id_of("test device (host memory)"), "");
}

TEST(GpuDevices, TheMonitorReadsEachGpusBusIdAndItTravelsInTheNodeStatus) {
  char path[] = "/tmp/genie_nvml_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string gpus = "GPU-A 10 40 1024 10\nGPU-B 20 50 2048 20 000000ab:f1:1f.0\n";
  ASSERT_EQ(::write(fd, gpus.data(), gpus.size()), static_cast<ssize_t>(gpus.size()));
  ::close(fd);
  ::setenv("GENIE_NVML_LIBRARY", GENIE_TEST_NVML_LIBRARY, 1);
  ::setenv("GENIE_TEST_NVML_FILE", path, 1);
  {
    GpuMonitor m;
    ASSERT_TRUE(m.nvml_loaded()) << m.reason();
    m.poll();
    ASSERT_EQ(m.gpus().size(), 2u) << m.reason();
    EXPECT_EQ(m.gpus()[0].pci_bus_id, "0000:01:00.0");
    EXPECT_EQ(m.gpus()[1].pci_bus_id, "00ab:f1:1f.0");
    // No local device sits at these addresses (there is no CUDA device
    // here, and none at such a bus anywhere).
    EXPECT_EQ(m.gpus()[1].device, "");

    NodeStatus n;
    n.id = "n";
    n.gpus = m.gpus();
    n.gpus[1].device = "cuda:3";
    const NodeStatus back = node_from_json(node_to_json(n).get());
    ASSERT_EQ(back.gpus.size(), 2u);
    EXPECT_EQ(back.gpus[1].pci_bus_id, "00ab:f1:1f.0");
    EXPECT_EQ(back.gpus[1].device, "cuda:3");
    EXPECT_EQ(back.gpus[0].device, "");
  }
  ::unsetenv("GENIE_TEST_NVML_FILE");
  ::unsetenv("GENIE_NVML_LIBRARY");
  ::unlink(path);
}

}  // namespace
}  // namespace genie
