// Probes that load a library into a child process: DPDK's EAL and UCX
// install hooks, threads and signal handlers that a probe must not leave in
// the caller, and either can hang or crash on a broken host. The child
// writes its report to a pipe and exits; the parent reads until end of
// file, within a deadline, and kills a child that overruns it.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <functional>
#include <string>

namespace genie {

struct ChildReport {
  bool finished = false;  // the child closed the pipe (exited) within the deadline
  std::string bytes;      // all it wrote
  std::string error;      // pipe or fork failed (then nothing ran)
};

// Forks and runs `child(fd)` there; `child` writes to fd and must not
// return (it ends with _exit). Reaps the child before returning.
ChildReport run_child_probe(int64_t timeout_ms, const std::function<void(int fd)>& child);

// dlsym of `name` in `lib` into the function pointer `out`; false when
// the library lacks it.
template <class F>
bool probe_symbol(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  return out != nullptr;
}

}  // namespace genie
