// Small tensors inside a submission and its completion (Welcome.
// inline_tensors; docs/protocol.md, "Small tensors inside a submission"):
// inline inputs become host tensors of the submission alone, charged to its
// session while the graph holds them; outputs asked back travel inside the
// GraphDone, still kept in the session.
#include <algorithm>
#include <cstring>

#include "control/semantic_tag.hpp"
#include "server/impl.hpp"
#include "server/trace_spans.hpp"

namespace genie {

void Server::Impl::bind_inline(Peer& p, const Inlined& in, std::vector<std::string>& names,
                               std::vector<TensorDesc>& descs, std::vector<TensorPtr>& tensors) {
  if (in.empty()) return;
  size_t total = 0;
  for (const wire::InlineTensor& m : in) {
    const std::string& name = m.name();
    check(dtype_valid(m.dtype()), GENIE_ERR_INVALID_ARGUMENT, "inline input '", name, "': dtype ", m.dtype(),
          " is not a genie_dtype_t");
    check(m.shape_size() <= GENIE_MAX_DIMS, GENIE_ERR_INVALID_ARGUMENT, "inline input '", name, "': shape has ",
          m.shape_size(), " dimensions (at most ", GENIE_MAX_DIMS, ")");
    Shape shape(m.shape().begin(), m.shape().end());
    for (size_t i = 0; i < shape.size(); ++i)
      check(shape[i] >= 0, GENIE_ERR_INVALID_ARGUMENT, "inline input '", name, "': dimension ", i, " is ",
            shape[i], " (must be >= 0)");
    const DType dtype = static_cast<DType>(m.dtype());
    const size_t bytes = byte_size(shape, dtype_size(dtype));  // TOO_LARGE on overflow
    check(m.data().size() == bytes, GENIE_ERR_SIZE_MISMATCH, "inline input '", name, "' holds ", m.data().size(),
          " bytes for a tensor of ", bytes);
    check(bytes <= wire::kMaxInlineTensorBytes && total + bytes <= wire::kMaxInlineBytes, GENIE_ERR_TOO_LARGE,
          "inline input '", name, "' of ", bytes, " bytes: at most ", wire::kMaxInlineTensorBytes,
          " bytes each and ", wire::kMaxInlineBytes, " in all inside a submission");
    total += bytes;
    check(std::find(names.begin(), names.end(), name) == names.end(), GENIE_ERR_INVALID_ARGUMENT, "input '", name,
          "' is bound twice");
    // A tensor of the session, and its bytes, for as long as the graph
    // holds it.
    std::shared_ptr<MemoryGate::Reservation> charge = gate.charge(
        p.session, bytes, [&] { return cat("inline input '", name, "' of ", bytes, " bytes"); }, 1);
    struct Held {
      Held(DType d, Shape s, std::shared_ptr<MemoryGate::Reservation> c)
          : t(d, std::move(s), TensorData::Uninitialized{}), charge(std::move(c)) {}
      TensorData t;  // every byte written below
      std::shared_ptr<MemoryGate::Reservation> charge;
    };
    auto held = std::make_shared<Held>(dtype, std::move(shape), std::move(charge));
    if (bytes != 0) std::memcpy(held->t.bytes(), m.data().data(), bytes);
    names.push_back(name);
    descs.push_back({held->t.dtype(), held->t.shape()});
    tensors.push_back(TensorPtr(held, &held->t));
  }
}

void Server::Impl::count_inline(const Graph& g, const std::vector<std::string>& names, size_t first,
                                const std::vector<TensorPtr>& tensors) {
  for (size_t i = first; i < names.size() && i < tensors.size(); ++i)
    if (tensors[i]) count_tagged("write", semantic_tag(g, g.find_value(names[i])), tensors[i]->nbytes());
}

void Server::Impl::want_outputs(Peer& p, uint64_t rid, const google::protobuf::RepeatedField<uint32_t>& which) {
  if (which.empty() || p.returning.size() >= kMaxTracedInFlight) return;
  p.returning[rid].assign(which.begin(), which.end());
}

std::vector<uint32_t> Server::Impl::take_wanted_outputs(Peer& p, uint64_t rid) {
  std::vector<uint32_t> out;
  if (p.returning.empty()) return out;
  auto it = p.returning.find(rid);
  if (it == p.returning.end()) return out;
  out = std::move(it->second);
  p.returning.erase(it);
  return out;
}

void add_output_data(const TensorData* t, wire::OutputTensor& o, size_t* budget) {
  if (t == nullptr || !t->host_accessible()) return;
  const size_t n = t->nbytes();
  if (n > wire::kMaxInlineTensorBytes || n > *budget) return;
  *budget -= n;
  o.set_data(t->bytes(), n);
  o.set_has_data(true);
}

}  // namespace genie
