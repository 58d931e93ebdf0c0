#include "core/memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

namespace genie {

namespace {

// The first token of `file` as a byte count: false when the file is
// missing, says "max", or holds no number.
bool read_number(const std::string& file, uint64_t* out) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word) || word.empty() || word.find_first_not_of("0123456789") != std::string::npos) return false;
  try {
    *out = std::stoull(word);
  } catch (...) {
    return false;
  }
  return true;
}

// v1 reports "no limit" as a huge page-rounded number.
constexpr uint64_t kNoLimit = uint64_t{1} << 60;

// The tightest limit of `dir` and its ancestors up to `root`, with the usage
// of the cgroup that sets it.
void tightest(const std::string& root, std::string rel, const char* limit_file, const char* usage_file,
              HostMemory* m) {
  for (;;) {
    const std::string dir = root + rel;
    uint64_t limit = 0;
    if (read_number(dir + "/" + limit_file, &limit) && limit < kNoLimit &&
        (m->cgroup_limit == 0 || limit < m->cgroup_limit)) {
      m->cgroup_limit = limit;
      uint64_t usage = 0;
      m->cgroup_usage = read_number(dir + "/" + usage_file, &usage) ? usage : 0;
    }
    if (rel.empty() || rel == "/") return;
    const size_t slash = rel.rfind('/');
    rel = slash == std::string::npos ? "" : rel.substr(0, slash);
  }
}

}  // namespace

uint64_t HostMemory::headroom() const {
  uint64_t h = available ? available : physical;
  if (cgroup_limit) {
    const uint64_t left = cgroup_limit > cgroup_usage ? cgroup_limit - cgroup_usage : 0;
    h = h ? std::min(h, left) : left;
  }
  return h;
}

HostMemory read_host_memory(const std::string& proc, const std::string& sys_cgroup) {
  HostMemory m;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) m.physical = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  {
    std::ifstream in(proc + "/meminfo");
    std::string key, unit;
    uint64_t kb = 0;
    while (in >> key >> kb >> unit)
      if (key == "MemAvailable:") {
        m.available = kb * 1024;
        break;
      }
  }
  // /proc/self/cgroup: "0::/path" (v2) and "N:controllers:/path" (v1). In a
  // container the path may not exist under the mount (it names the host's
  // hierarchy): its ancestors, down to the mount's root, are read too.
  std::ifstream in(proc + "/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) {
      tightest(sys_cgroup, path, "memory.max", "memory.current", &m);
      continue;
    }
    std::stringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');)
      if (c == "memory") tightest(sys_cgroup + "/memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes", &m);
  }
  return m;
}

uint64_t default_memory_budget(const HostMemory& m) {
  return static_cast<uint64_t>(static_cast<double>(m.headroom()) * kDefaultBudgetFraction);
}

}  // namespace genie
