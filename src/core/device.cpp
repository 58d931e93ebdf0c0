#include "core/device.hpp"

#include <cctype>
#include <mutex>
#include <set>

#include "core/config.hpp"
#include "core/error.hpp"

namespace genie {

namespace {

std::mutex g_kinds_mu;
std::set<std::string>& registered_kinds() {
  static std::set<std::string> kinds;
  return kinds;
}

bool valid_kind_name(const std::string& k) {
  if (k.empty() || k.size() > 32 || !std::islower(static_cast<unsigned char>(k[0]))) return false;
  for (char c : k)
    if (!std::islower(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

}  // namespace

void register_device_kind(const std::string& kind) {
  check(valid_kind_name(kind) && kind != "gpu", GENIE_ERR_INVALID_ARGUMENT, "device kind '", kind,
        "' is not a valid kind name ([a-z][a-z0-9_]*, at most 32 characters, not the alias 'gpu')");
  std::lock_guard<std::mutex> lk(g_kinds_mu);
  registered_kinds().insert(kind);
}

bool device_kind_known(const std::string& kind) {
  if (kind == "cpu" || kind == "cuda" || kind == "remote") return true;
  std::lock_guard<std::mutex> lk(g_kinds_mu);
  return registered_kinds().count(kind) != 0;
}

std::string Device::local_str() const { return kind + ":" + std::to_string(index); }

std::string Device::str() const { return node.empty() ? local_str() : node + "/" + local_str(); }

Device parse_device(const char* text) {
  Device d;
  if (text == nullptr || *text == '\0') return d;
  const std::string s(text);
  const auto bad = [&](const char* why) {
    fail(GENIE_ERR_PARSE, "device '", s, "': ", why,
         " (expected [NODE/]KIND[:N] with KIND cpu, cuda (alias gpu), remote or a loaded backend's kind,"
         " e.g. cpu, cuda:1, remote:0, node-b/cuda:1)");
  };
  std::string rest = s;
  if (const size_t slash = s.find('/'); slash != std::string::npos) {
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
  if (const size_t colon = rest.find(':'); colon != std::string::npos) {
    kind = rest.substr(0, colon);
    const std::string num = rest.substr(colon + 1);
    if (num.empty() || num.size() > 6) bad("device index must be 0..999999");
    for (char c : num)
      if (!std::isdigit(static_cast<unsigned char>(c))) bad("device index is not a number");
    d.index = std::stoi(num);
  }
  if (kind.empty()) bad("empty device kind");
  if (kind == "gpu") kind = "cuda";
  // Another node's devices may be of a kind this process has no backend
  // for: there, a well-formed kind name is enough (that node says whether
  // it has such a device). Here, the kind must be one a backend serves.
  if (!device_kind_known(kind) && (d.node.empty() || !valid_kind_name(kind))) bad("unknown device kind");
  if (kind == "remote" && !d.node.empty()) bad("'remote' takes no node prefix");
  d.kind = std::move(kind);
  return d;
}

}  // namespace genie
