#include "timeline.hpp"

#include <algorithm>

namespace genie::replay {

namespace {

using Spans = std::vector<std::pair<int64_t, int64_t>>;

Spans merged(Spans v) {
  std::sort(v.begin(), v.end());
  Spans out;
  for (const auto& s : v) {
    if (!out.empty() && s.first <= out.back().second)
      out.back().second = std::max(out.back().second, s.second);
    else
      out.push_back(s);
  }
  return out;
}

}  // namespace

int64_t Timeline::exposed_comm_ns() const {
  std::lock_guard<std::mutex> lk(mu_);
  const Spans comm = merged(comm_);
  const Spans comp = merged(comp_);
  int64_t exposed = 0;
  size_t j = 0;
  for (const auto& [b, e] : comm) {
    int64_t covered = 0;
    while (j < comp.size() && comp[j].second <= b) ++j;
    for (size_t k = j; k < comp.size() && comp[k].first < e; ++k)
      covered += std::min(e, comp[k].second) - std::max(b, comp[k].first);
    exposed += (e - b) - covered;
  }
  return exposed;
}

}  // namespace genie::replay
