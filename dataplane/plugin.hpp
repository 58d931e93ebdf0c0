// The entry point of a transport plugin: a shared object named
// libgenie_transport_<name>.so that defines, with default visibility,
//
//   extern "C" const GenieTransportPlugin* genie_transport_plugin(void);
//
// (GENIE_TRANSPORT_PLUGIN below writes it). The registry
// (dataplane/registry.hpp) loads the file with dlopen, reads abi_version
// first and refuses a plugin built for another version before touching
// anything else, then checks the name and calls create(host).
//
// The plugin implements the C++ classes of dataplane/transport.hpp and
// compiles their out-of-line code (dataplane/transport.cpp) into itself:
// libgenie exports nothing but its C API. What the plugin needs of
// libgenie's own state (the loop close hooks LoopThread runs, the log)
// comes through the TransportHost passed to create(). The classes cross the
// boundary as they are, so a plugin must be built with the same compiler
// family and C++ standard library as libgenie, and kTransportAbiVersion goes
// up with every change to transport.hpp, blocking.hpp, frame.hpp or TransportHost. A
// loaded plugin is never unloaded (its objects may live until the process
// exits).
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <string>

#include "core/log.hpp"
#include "core/metrics.hpp"
#include "core/spin.hpp"
#include "dataplane/transport.hpp"

namespace genie::dataplane {

constexpr uint32_t kTransportAbiVersion = 5;  // 5: Transport::connect_blocking, TransportHost::spin
constexpr const char* kPluginEntrySymbol = "genie_transport_plugin";

// libgenie's services for a plugin; valid until the process exits.
struct TransportHost {
  // dataplane/loop_hooks.hpp: a channel or listener registers a hook that
  // closes it when its loop is torn down.
  uint64_t (*add_close_hook)(uv_loop_t* loop, std::function<void()> fn);
  void (*remove_close_hook)(uv_loop_t* loop, uint64_t id);
  // libgenie's log at its current level (core/log.hpp).
  void (*log)(LogLevel level, const std::string& msg);
  // The counter of the bytes `transport` sent or received
  // (dataplane/transport_bytes.hpp, which says what to count); it lives as
  // long as the process, so a plugin resolves it once and adds to it from
  // any thread (Counter::add is inline: no call into libgenie).
  metrics::Counter& (*byte_counter)(const char* transport, bool sent);
  // core/spin.hpp's spin_while (libgenie's rule for when a thread may
  // busy-wait before it sleeps): a blocking channel polls its transport
  // this way before it waits on the transport's event fd.
  bool (*spin)(const std::function<SpinStep()>& step, std::chrono::microseconds idle);
};

// The host libgenie passes to the plugins it loads.
const TransportHost& transport_host();

}  // namespace genie::dataplane

extern "C" {

struct GenieTransportPlugin {
  uint32_t abi_version;  // first, at the same place in every version
  const char* name;      // the registry name; must match the file name
  // Creates the transport; may throw genie::Error (e.g. a device missing),
  // which the registry reports as the reason the name is not available.
  genie::dataplane::Transport* (*create)(const genie::dataplane::TransportHost* host);
};

typedef const GenieTransportPlugin* (*GenieTransportPluginFn)(void);

}  // extern "C"

// Defines the entry point of a plugin named NAME whose transport CREATE
// (a function taking the host and returning a new Transport*) makes.
#define GENIE_TRANSPORT_PLUGIN(NAME, CREATE)                                                            \
  extern "C" __attribute__((visibility("default"))) const GenieTransportPlugin* genie_transport_plugin( \
      void) {                                                                                           \
    static const GenieTransportPlugin entry{genie::dataplane::kTransportAbiVersion, NAME, CREATE};      \
    return &entry;                                                                                      \
  }
