// Device strings: "cpu", "cpu:0", "gpu:1", "cuda:1", "remote:0",
// "node-b/gpu:1", "node-b/cpu".
#pragma once

#include <string>

namespace genie {

struct Device {
  enum class Kind { Cpu, Gpu, Remote };
  Kind kind = Kind::Cpu;
  int index = 0;
  std::string node;  // empty = this process (or, for Remote, the master)

  bool is_local_cpu() const { return kind == Kind::Cpu && node.empty(); }
  // Canonical form: "cpu:0", "gpu:1", "remote:0", "node-b/gpu:1".
  std::string str() const;
};

// Parses a device string; NULL or "" is "cpu:0". Throws Error(PARSE) naming
// the string and what was expected.
Device parse_device(const char* text);

}  // namespace genie
