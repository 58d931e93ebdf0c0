// Transport plugins that must be refused, for the registry's tests: built
// once per case with FAKE_NAME (what the entry says its name is),
// FAKE_ABI (the ABI version it claims), FAKE_THROWS (create() fails the
// way a plugin whose hardware is missing does) and FAKE_NO_ENTRY (a shared
// object without the entry point).
#include "core/error.hpp"
#include "dataplane/plugin.hpp"

namespace {

genie::dataplane::Transport* create(const genie::dataplane::TransportHost*) {
#if FAKE_THROWS
  genie::fail(GENIE_ERR_UNSUPPORTED, "no such device here");
#endif
  return nullptr;
}

}  // namespace

#if FAKE_NO_ENTRY
extern "C" __attribute__((visibility("default"))) int genie_transport_something_else(void) { return 0; }
#else
extern "C" __attribute__((visibility("default"))) const GenieTransportPlugin* genie_transport_plugin(void) {
  static const GenieTransportPlugin entry{FAKE_ABI, FAKE_NAME, create};
  return &entry;
}
#endif
