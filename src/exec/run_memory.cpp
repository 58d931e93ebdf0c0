#include "exec/run_memory.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/error.hpp"

namespace genie {

namespace {

uint64_t value_bytes(const Value& v) {
  try {
    return byte_size(v.shape, dtype_size(v.dtype));
  } catch (const Error&) {  // beyond the largest tensor: cannot fit anywhere
    return std::numeric_limits<uint64_t>::max();
  }
}

uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}

}  // namespace

RunMemory run_memory(const Graph& g) {
  check(g.validated(), GENIE_ERR_INTERNAL, "run_memory: graph '", g.name(), "' is not validated");
  RunMemory m;
  const auto& order = g.topo_order();
  const size_t nv = g.values().size();
  // Position in `order` of each value's last consumer; graph outputs live to
  // the end.
  std::vector<size_t> last(nv, 0);
  std::vector<bool> is_output(nv, false);
  for (size_t k = 0; k < order.size(); ++k)
    for (ValueId v : g.node(order[k]).inputs)
      if (v != kNone) last[static_cast<size_t>(v)] = k;
  for (ValueId v : g.outputs()) {
    is_output[static_cast<size_t>(v)] = true;
    if (g.value(v).kind == ValueKind::NodeOutput) {
      m.outputs = sat_add(m.outputs, value_bytes(g.value(v)));
      ++m.num_outputs;
    }
  }
  // Bytes freed after each position: a value nobody consumes goes right
  // after its node, unless it is an output.
  std::vector<uint64_t> freed(order.size(), 0);
  uint64_t live = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    for (ValueId v : g.node(order[k]).outputs) {
      const uint64_t b = value_bytes(g.value(v));
      live = sat_add(live, b);
      if (m.largest == kNone || b > m.largest_bytes) m.largest = v, m.largest_bytes = b;
      if (!is_output[static_cast<size_t>(v)]) {
        uint64_t& f = freed[std::max(k, last[static_cast<size_t>(v)])];
        f = sat_add(f, b);
      }
    }
    m.peak = std::max(m.peak, live);
    live -= std::min(live, freed[k]);
  }
  return m;
}

std::string RunMemory::describe(const Graph& g) const {
  std::string s = cat("graph '", g.name(), "': outputs and intermediates of up to ", peak, " bytes (outputs ",
                      outputs, " bytes");
  if (largest != kNone) {
    const Value& v = g.value(largest);
    s += cat("; largest: '", v.name, "' ", dtype_name(v.dtype), shape_str(v.shape), " of ", largest_bytes, " bytes");
  }
  return s + ")";
}

}  // namespace genie
