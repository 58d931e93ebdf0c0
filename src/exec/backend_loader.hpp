// Device backends loaded at run time from shared objects, and the
// process-wide set of them.
//
// A backend of kind K lives in libgenie_backend_K.so, found in the
// directories of $GENIE_DEVICE_BACKEND_PATH (colon-separated), then beside
// libgenie itself, then on the system's library path. Loading checks the
// plugin's entry point (GENIE_DEVICE_BACKEND_ENTRY) and its ABI version
// (kDeviceBackendAbi) before creating the backend; a plugin that is
// missing, of another ABI version, of another kind, or whose create() finds
// no driver or device leaves the kind unavailable with a reason, which is
// what genie_tensor_alloc reports for its devices. Never throws for a
// plugin's problems: libgenie runs on the CPU without any.
//
// The kinds probed for this process's devices are "cuda" and those listed
// in $GENIE_DEVICE_BACKENDS (comma-separated). Each is loaded at most once per
// process; a loaded backend stays for the life of the process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exec/backend.hpp"

namespace genie {

struct LoadedBackend {
  std::string kind;
  std::string path;                        // the file loaded (or the last one tried)
  std::shared_ptr<DeviceBackend> backend;  // null when unavailable
  std::string why_unavailable;             // set when backend is null
};

// Loads the plugin in `file` (a path, or a bare name searched as dlopen
// does). `kind`: what the plugin must serve ("" accepts any kind). On
// success registers the kind with parse_device (register_device_kind).
LoadedBackend load_backend_plugin(const std::string& file, const std::string& kind = "");

// The file name of kind K's plugin: "libgenie_backend_K.so".
std::string backend_plugin_name(const std::string& kind);

// The process's backend of `kind` ("cpu" excepted: each Executor has its
// own), found and loaded on first use as described above. Thread-safe;
// the reference stays valid for the life of the process.
const LoadedBackend& device_backend(const std::string& kind);

// The kinds to probe for this process's devices: "cuda", then those named
// in $GENIE_DEVICE_BACKENDS (invalid names are logged and skipped). Each is also
// registered with parse_device, so that a device of a kind whose backend is
// unavailable is reported as such rather than as an unknown kind.
std::vector<std::string> probed_backend_kinds();

}  // namespace genie
