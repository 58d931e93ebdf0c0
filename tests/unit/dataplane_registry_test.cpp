// Transports by name (dataplane/registry.hpp): TCP built in, the loopback
// plugin found and loaded at run time, and every way a plugin can fail to
// be had, each with a status and a reason that names it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "dataplane/plugin.hpp"
#include "dataplane/registry.hpp"
#include "dataplane_testing.hpp"

namespace genie::dataplane {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class Registry : public ::testing::Test {
 protected:
  void SetUp() override { testing::use_build_plugins(); }
};

TEST_F(Registry, TcpIsBuiltInAndTheSameEachTime) {
  TransportLookup a = lookup_transport("tcp");
  ASSERT_TRUE(a.transport) << a.reason;
  EXPECT_EQ(a.status, GENIE_OK);
  EXPECT_EQ(a.transport->capabilities().name, "tcp");
  EXPECT_FALSE(a.transport->capabilities().link_endpoints);  // a port is the host's
  EXPECT_EQ(find_transport("tcp"), a.transport);
}

TEST_F(Registry, LoopbackPluginIsFoundOnTheSearchPathAndLoaded) {
  const auto dirs = transport_search_path();
  ASSERT_FALSE(dirs.empty());
  EXPECT_EQ(dirs.front(), GENIE_PLUGIN_DIR);
  TransportLookup got = lookup_transport("loopback");
  ASSERT_TRUE(got.transport) << got.reason;
  EXPECT_EQ(got.transport->capabilities().name, "loopback");
  EXPECT_EQ(find_transport("loopback"), got.transport);  // loaded once
}

TEST_F(Registry, MissingPluginIsNotFoundNamingTheFileAndWhereItLooked) {
  TransportLookup got = lookup_transport("nosuch");
  EXPECT_FALSE(got.transport);
  EXPECT_EQ(got.status, GENIE_ERR_NOT_FOUND);
  EXPECT_TRUE(has(got.reason, "libgenie_transport_nosuch.so")) << got.reason;
  EXPECT_TRUE(has(got.reason, GENIE_PLUGIN_DIR)) << got.reason;
  try {
    find_transport("nosuch");
    ADD_FAILURE() << "find_transport found a missing plugin";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_NOT_FOUND);
    EXPECT_TRUE(has(e.detail(), "nosuch")) << e.detail();
  }
  // TCP keeps working.
  EXPECT_TRUE(lookup_transport("tcp").transport);
}

TEST_F(Registry, BadNamesAreInvalidArguments) {
  for (const char* name : {"", "Tcp", "../tcp", "a-b", "x y"}) {
    TransportLookup got = lookup_transport(name);
    EXPECT_FALSE(got.transport) << name;
    EXPECT_EQ(got.status, GENIE_ERR_INVALID_ARGUMENT) << name;
  }
}

TEST_F(Registry, PluginOfAnotherAbiVersionIsRefusedNamingBothVersions) {
  TransportLookup got = lookup_transport("badabi");
  EXPECT_FALSE(got.transport);
  EXPECT_EQ(got.status, GENIE_ERR_VERSION_MISMATCH);
  EXPECT_TRUE(has(got.reason, "ABI version 999")) << got.reason;
  EXPECT_TRUE(has(got.reason, "version " + std::to_string(kTransportAbiVersion))) << got.reason;
  EXPECT_TRUE(has(got.reason, "libgenie_transport_badabi.so")) << got.reason;
}

TEST_F(Registry, PluginNamingItselfOtherwiseIsRefused) {
  TransportLookup got = lookup_transport("misnamed");
  EXPECT_FALSE(got.transport);
  EXPECT_EQ(got.status, GENIE_ERR_UNSUPPORTED);
  EXPECT_TRUE(has(got.reason, "names itself 'other'")) << got.reason;
}

TEST_F(Registry, PluginThatCannotStartPassesItsReasonOn) {
  TransportLookup got = lookup_transport("throws");
  EXPECT_FALSE(got.transport);
  EXPECT_EQ(got.status, GENIE_ERR_UNSUPPORTED);
  EXPECT_TRUE(has(got.reason, "no such device here")) << got.reason;
}

TEST_F(Registry, ADirectoryNamedTwiceIsSearchedOnce) {
  ::setenv("GENIE_TRANSPORT_PATH", GENIE_TEST_PLUGIN_DIR ":" GENIE_TEST_PLUGIN_DIR ":" GENIE_PLUGIN_DIR, 1);
  const auto dirs = transport_search_path();
  EXPECT_EQ(std::count(dirs.begin(), dirs.end(), std::string(GENIE_TEST_PLUGIN_DIR)), 1);
  EXPECT_EQ(dirs.front(), GENIE_TEST_PLUGIN_DIR);
  // So a plugin that cannot start gives its reason once.
  TransportLookup got = lookup_transport("throws");
  EXPECT_FALSE(got.transport);
  const std::string why = "no such device here";
  const size_t first = got.reason.find(why);
  ASSERT_NE(first, std::string::npos) << got.reason;
  EXPECT_EQ(got.reason.find(why, first + 1), std::string::npos) << got.reason;
}

TEST_F(Registry, PluginWhoseLibrariesCannotLoadIsUnsupported) {
  // What dlopen says of a plugin whose libraries are not installed: the
  // file is there but cannot be loaded.
  char dir[] = "/tmp/genie_plugins_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/libgenie_transport_broken.so";
  std::ofstream(path) << "not an ELF object";
  ::setenv("GENIE_TRANSPORT_PATH", dir, 1);
  TransportLookup got = lookup_transport("broken");
  EXPECT_FALSE(got.transport);
  EXPECT_EQ(got.status, GENIE_ERR_UNSUPPORTED);
  EXPECT_TRUE(has(got.reason, "cannot be loaded")) << got.reason;
  EXPECT_TRUE(has(got.reason, path)) << got.reason;
  std::remove(path.c_str());
  ::rmdir(dir);
}

TEST_F(Registry, SharedObjectWithoutTheEntryPointIsNoPlugin) {
  TransportLookup got = lookup_transport("noentry");
  EXPECT_FALSE(got.transport);
  EXPECT_EQ(got.status, GENIE_ERR_UNSUPPORTED);
  EXPECT_TRUE(has(got.reason, "is not a transport plugin (no genie_transport_plugin)")) << got.reason;
}

}  // namespace
}  // namespace genie::dataplane
