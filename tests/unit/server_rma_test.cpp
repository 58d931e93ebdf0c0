// Requests for tensor bytes by RMA (server/rma.hpp): the client's
// region descriptor is refused, with a detail naming why, when it does not
// decode, belongs to another transport than the connection's, or is
// smaller than the bytes to move (a missing key is the transport's to
// refuse: dataplane_transport_test). (tests/scripts/ucx_test.sh
// moves real tensors this way between processes.)
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "server/rma.hpp"

namespace genie {
namespace {

dataplane::MemoryDescriptor region(const std::string& transport, uint64_t length, std::string key) {
  dataplane::MemoryDescriptor d;
  d.transport = transport;
  d.address = 0x10000;
  d.length = length;
  d.key = std::move(key);
  return d;
}

void expect_refused(const std::string& encoded, uint64_t nbytes, const std::string& why) {
  try {
    check_rma_region(encoded, "ucx", nbytes);
    ADD_FAILURE() << "accepted; expected a refusal naming '" << why << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_INVALID_ARGUMENT) << e.detail();
    EXPECT_NE(e.detail().find(why), std::string::npos) << e.detail();
  }
}

TEST(ControlRma, AGoodRegionIsTakenAsTheClientSentIt) {
  const auto d = check_rma_region(region("ucx", 4096, "packed-rkey").encode(), "ucx", 4096);
  EXPECT_EQ(d.address, 0x10000u);
  EXPECT_EQ(d.length, 4096u);
  EXPECT_EQ(d.key, "packed-rkey");
}

TEST(ControlRma, BadRegionsAreRefusedNamingWhy) {
  expect_refused("not a descriptor", 16, "does not decode");
  expect_refused(region("ucx", 4096, "k").encode().substr(0, 10), 16, "does not decode");
  expect_refused(region("loopback", 4096, "k").encode(), 16, "registered with transport 'loopback'");
  expect_refused(region("ucx", 4096, "k").encode(), 4097, "falls outside the RMA region of 4096 bytes");
}

}  // namespace
}  // namespace genie
