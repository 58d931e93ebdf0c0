#include "dataplane/transport_bytes.hpp"

#include <mutex>

namespace genie::dataplane {
namespace {

std::mutex g_mu;
std::vector<std::string>& counted() {
  static std::vector<std::string> names{"tcp"};
  return names;
}

}  // namespace

metrics::Counter& transport_bytes(const std::string& transport, bool sent) {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto& names = counted();
    bool known = false;
    for (const std::string& n : names) known = known || n == transport;
    if (!known) names.push_back(transport);
  }
  return metrics::counter(metrics::Id::TransportBytes, {transport.c_str(), sent ? "sent" : "received"});
}

std::vector<std::pair<std::string, uint64_t>> transport_byte_totals() {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    names = counted();
  }
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const std::string& n : names)
    for (const char* dir : {"sent", "received"})
      out.emplace_back(n + " " + dir, metrics::counter(metrics::Id::TransportBytes, {n.c_str(), dir}).value());
  return out;
}

}  // namespace genie::dataplane
