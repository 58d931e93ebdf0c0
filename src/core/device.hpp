// Device ids: where a device is (its node) separate from what it is (its
// kind) and which one of its kind (its index).
//
//   "cpu", "cpu:0"       this process's CPU
//   "cuda:1" ("gpu:1")   CUDA device 1 of this process ("gpu" is an alias)
//   "remote:0"           device 0 of the master server (remote mode)
//   "node-b/cuda:1"      CUDA device 1 of node node-b
//   "KIND:N"             device N of a backend loaded at run time
//                        (exec/backend.hpp), once that backend has
//                        registered its kind
//
// Canonical names print as [NODE/]KIND:INDEX with the alias resolved.
#pragma once

#include <string>

namespace genie {

struct Device {
  std::string kind = "cpu";  // "cpu", "cuda", "remote", or a registered backend kind
  int index = 0;
  std::string node;  // empty = this process (or, for "remote", the master)

  bool is_cpu() const { return kind == "cpu"; }
  bool is_remote() const { return kind == "remote"; }
  bool is_local_cpu() const { return is_cpu() && node.empty(); }
  // "cpu:0", "cuda:1", "remote:0", "node-b/cuda:1".
  std::string str() const;
  // "cuda:1": the id without its node.
  std::string local_str() const;
  bool operator==(const Device&) const = default;
};

// Parses a device string; NULL or "" is "cpu:0". Throws Error(PARSE) naming
// the string and what was expected: an unknown kind (with a node prefix,
// any well-formed kind name is accepted: that node's backends decide), an
// index that is not a number in 0..999999, an empty or malformed node name,
// a node prefix on "remote". Thread-safe.
Device parse_device(const char* text);

// Makes `kind` ([a-z][a-z0-9_]*, at most 32 characters) a device kind that
// parse_device accepts: a device backend does so when it loads. "cpu",
// "cuda" and "remote" are always known. Throws Error(INVALID_ARGUMENT) for a
// malformed name or an alias ("gpu"). Thread-safe.
void register_device_kind(const std::string& kind);
bool device_kind_known(const std::string& kind);

}  // namespace genie
