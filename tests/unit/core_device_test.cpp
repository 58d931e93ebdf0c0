// Device ids: node, kind and index apart; aliases; kinds registered by
// backends; malformed strings refused with the string in the detail.
#include <gtest/gtest.h>

#include <string>

#include "core/device.hpp"
#include "core/error.hpp"
#include "graph_test_util.hpp"

namespace genie {
namespace {

TEST(DeviceId, SeparatesNodeKindAndIndex) {
  const Device d = parse_device("node-b/cuda:1");
  EXPECT_EQ(d.node, "node-b");
  EXPECT_EQ(d.kind, "cuda");
  EXPECT_EQ(d.index, 1);
  EXPECT_EQ(d.str(), "node-b/cuda:1");
  EXPECT_EQ(d.local_str(), "cuda:1");
  EXPECT_FALSE(d.is_cpu());

  const Device c = parse_device("cpu:0");
  EXPECT_TRUE(c.node.empty());
  EXPECT_EQ(c.kind, "cpu");
  EXPECT_EQ(c.index, 0);
  EXPECT_TRUE(c.is_local_cpu());
}

TEST(DeviceId, AcceptedSpellingsAndCanonicalNames) {
  struct Case {
    const char* in;
    const char* canonical;
  } cases[] = {
      {"cpu", "cpu:0"},
      {"cpu:0", "cpu:0"},
      {"gpu:1", "cuda:1"},
      {"cuda:3", "cuda:3"},
      {"gpu", "cuda:0"},
      {"remote:0", "remote:0"},
      {"remote:2", "remote:2"},
      {"node-b/cpu", "node-b/cpu:0"},
      {"node-b/gpu:1", "node-b/cuda:1"},
      {"n.1_x/cpu:0", "n.1_x/cpu:0"},
  };
  for (const Case& c : cases) EXPECT_EQ(parse_device(c.in).str(), c.canonical) << c.in;
  // NULL and "" are this process's CPU.
  EXPECT_EQ(parse_device(nullptr).str(), "cpu:0");
  EXPECT_EQ(parse_device("").str(), "cpu:0");
  EXPECT_TRUE(parse_device("remote:0").is_remote());
  // Round trip: a canonical name parses to the same device.
  for (const Case& c : cases) EXPECT_EQ(parse_device(parse_device(c.in).str().c_str()), parse_device(c.in));
}

TEST(DeviceId, MalformedStringsAreRefusedNamingThem) {
  const char* bad[] = {"tpu:0", "cpu:x",   "cpu:",       "cpu:-1",  "cpu:1234567",
                       ":1",    "/cpu:0",  "node b/cpu", "node-b/", "node-b/remote:0",
                       "CPU:0", "a/b/cpu", "cuda:1:2",   "cpu 0"};
  // PARSE: what the C API has always answered for a malformed device
  // string (genie_tensor_alloc); the detail names it and what was expected.
  for (const char* s : bad) {
    EXPECT_TRUE(testing::fails_with([&] { parse_device(s); }, GENIE_ERR_PARSE, std::string("'") + s + "'"));
    EXPECT_TRUE(testing::fails_with([&] { parse_device(s); }, GENIE_ERR_PARSE, "expected [NODE/]KIND[:N]"));
  }
}

TEST(DeviceId, AnotherNodesDevicesMayBeOfKindsUnknownHere) {
  const Device d = parse_device("node-q/npu:2");
  EXPECT_EQ(d.node, "node-q");
  EXPECT_EQ(d.kind, "npu");
  EXPECT_EQ(d.index, 2);
  EXPECT_THROW(parse_device("npu:2"), Error);         // here: no backend serves it
  EXPECT_THROW(parse_device("node-q/NPU:2"), Error);  // not a kind name anywhere
  EXPECT_THROW(parse_device("node-q/gpu-x:2"), Error);
}

TEST(DeviceId, BackendsRegisterTheirKinds) {
  EXPECT_FALSE(device_kind_known("fakedev"));
  EXPECT_THROW(parse_device("fakedev:1"), Error);
  register_device_kind("fakedev");
  EXPECT_TRUE(device_kind_known("fakedev"));
  const Device d = parse_device("node-c/fakedev:1");
  EXPECT_EQ(d.kind, "fakedev");
  EXPECT_EQ(d.index, 1);
  EXPECT_EQ(d.node, "node-c");
  register_device_kind("fakedev");  // again: no change, no error
  for (const char* bad : {"", "Fake", "9x", "gpu", "a-b", "a:b", "abcdefghijklmnopqrstuvwxyz0123456"})
    EXPECT_TRUE(testing::fails_with([&] { register_device_kind(bad); }, GENIE_ERR_INVALID_ARGUMENT,
                                    std::string("'") + bad + "'"));
}

}  // namespace
}  // namespace genie
