#include "core/node_id.hpp"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <random>

namespace genie {

std::string generate_node_id(const std::string& kind) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string h;
  for (char* p = host; *p; ++p)
    if (std::isalnum(static_cast<unsigned char>(*p)) || *p == '-' || *p == '.' || *p == '_') h += *p;
  if (h.empty()) h = "host";
  std::random_device rd;
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "-%d-%04x", static_cast<int>(getpid()), rd() & 0xffffu);
  std::string id = h.substr(0, 200);
  if (!kind.empty()) id.append("-").append(kind, 0, 16);
  return id.append(suffix);
}

}  // namespace genie
