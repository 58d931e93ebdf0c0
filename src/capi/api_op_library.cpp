// C API: loading op libraries (genie_op_library_load), the plugin entry
// point of vendor ops for embedded programs, bindings and `genie serve
// --op-library`.
#include <dlfcn.h>

#include <mutex>
#include <set>

#include "capi/handles.hpp"

using namespace genie;

extern "C" {

genie_status_t genie_op_library_load(const char* path) {
  return guard([&] {
    check(path != nullptr && *path, GENIE_ERR_INVALID_ARGUMENT, "op library path is NULL or empty");
    static std::mutex mu;
    static std::set<void*>* loaded = new std::set<void*>;  // handles whose init succeeded
    std::lock_guard lk(mu);
    // RTLD_NODELETE: ops registered by the init point into the library,
    // so it stays mapped even if an init fails halfway.
    void* lib = ::dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == nullptr) {
      const char* why = ::dlerror();
      fail(GENIE_ERR_IO, "cannot load op library '", path, "': ", why ? why : "unknown reason");
    }
    if (loaded->count(lib)) {
      ::dlclose(lib);  // drops the reference this dlopen added
      return;
    }
    auto init = reinterpret_cast<genie_op_library_init_fn>(::dlsym(lib, GENIE_OP_LIBRARY_INIT));
    if (init == nullptr) {
      ::dlclose(lib);
      fail(GENIE_ERR_NOT_FOUND, "op library '", path, "' does not export ", GENIE_OP_LIBRARY_INIT,
           " (docs/custom-ops.md)");
    }
    set_last_error("");  // so that a failing init's own detail, or none, is what is passed on
    const genie_status_t st = init();
    if (st != GENIE_OK) {
      const std::string detail = genie_last_error();
      fail(st < 0 ? st : GENIE_ERR_INTERNAL, "op library '", path, "': ", GENIE_OP_LIBRARY_INIT, " returned ",
           genie_status_str(st), detail.empty() ? "" : ": ", detail);
    }
    loaded->insert(lib);
  });
}

}  // extern "C"
