#include "core/device.hpp"

#include <cctype>

#include "core/config.hpp"
#include "core/error.hpp"

namespace genie {

std::string Device::str() const {
  std::string s = node.empty() ? "" : node + "/";
  switch (kind) {
    case Kind::Cpu: s += "cpu"; break;
    case Kind::Gpu: s += "gpu"; break;
    case Kind::Remote: s += "remote"; break;
  }
  return s + ":" + std::to_string(index);
}

Device parse_device(const char* text) {
  Device d;
  if (text == nullptr || *text == '\0') return d;
  std::string s(text);
  const auto bad = [&](const char* why) {
    fail(GENIE_ERR_PARSE, "device '", s, "': ", why,
         " (expected cpu[:N], gpu:N, cuda:N, remote:N or NODE/cpu, NODE/gpu:N)");
  };
  std::string rest = s;
  if (auto slash = s.find('/'); slash != std::string::npos) {
    d.node = s.substr(0, slash);
    rest = s.substr(slash + 1);
    if (d.node.empty()) bad("empty node name");
    try {
      check_node_id(d.node, "node name");
    } catch (const Error&) {
      bad("node name may hold only [A-Za-z0-9._-]");
    }
  }
  std::string kind = rest;
  bool has_index = false;
  if (auto colon = rest.find(':'); colon != std::string::npos) {
    kind = rest.substr(0, colon);
    const std::string num = rest.substr(colon + 1);
    if (num.empty() || num.size() > 6) bad("device index must be 0..999999");
    for (char c : num)
      if (!std::isdigit(static_cast<unsigned char>(c))) bad("device index is not a number");
    d.index = std::stoi(num);
    has_index = true;
  }
  if (kind == "cpu") {
    d.kind = Device::Kind::Cpu;
  } else if (kind == "gpu" || kind == "cuda") {
    d.kind = Device::Kind::Gpu;
    if (!has_index) d.index = 0;
  } else if (kind == "remote") {
    if (!d.node.empty()) bad("'remote' takes no node prefix");
    d.kind = Device::Kind::Remote;
  } else {
    bad("unknown device kind");
  }
  return d;
}

}  // namespace genie
