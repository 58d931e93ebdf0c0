// What a test process has loaded: for tests that a library is loaded only
// when it is needed.
#pragma once

#include <fstream>
#include <string>

namespace genie::testing {

// Whether a file whose path contains `name` is mapped into this process
// (/proc/self/maps).
inline bool library_mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(name) != std::string::npos) return true;
  return false;
}

}  // namespace genie::testing
