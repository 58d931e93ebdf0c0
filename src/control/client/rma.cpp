#include "control/client/rma.hpp"

#include "control/wire_tag.hpp"
#include "core/log.hpp"
#include "dataplane/registry.hpp"

namespace genie {

bool RemoteClient::Impl::rma_transfer(bool write, uint64_t id, size_t offset, void* buf, size_t nbytes,
                                      const dataplane::SemanticTag& tag) {
  Impl& im = *this;
  if (nbytes < kRmaMinBytes) return false;
  std::string name;
  {
    std::lock_guard<std::mutex> lk(im.mu);
    name = im.data_endpoint.transport;
  }
  if (name == "tcp") return false;
  const dataplane::TransportLookup t = dataplane::lookup_transport(name);
  if (!t.transport || !t.transport->capabilities().rma) return false;
  // RMA that the transport would carry through the server's CPU anyway
  // (UCX with no RMA lane to this server): the framed payload is faster.
  if (im.data_rma_emulated) return false;
  std::shared_ptr<dataplane::MemoryRegion> region;
  try {
    region = t.transport->register_memory(buf, nbytes, dataplane::MemoryKind::Host);
  } catch (const Error& e) {
    log(LogLevel::Debug, "client: tensor ", id, ": cannot register the buffer with ", name, " (", e.detail(),
        "): framed transfer");
    return false;
  }
  // TensorRmaWrite and TensorRmaRead carry the same fields.
  auto encode = [&](auto m) {
    m.set_tensor_id(id);
    m.set_offset(offset);
    m.set_nbytes(nbytes);
    m.set_region(region->descriptor().encode());
    wire::put_tag(tag, &m);
    return wire::encode_msg(m);
  };
  std::string msg = write ? encode(wire::TensorRmaWrite()) : encode(wire::TensorRmaRead());
  auto call = std::make_shared<Call>(write ? MsgType::TensorRmaWrite : MsgType::TensorRmaRead, Link::Data);
  try {
    // The region stays registered until the reply: the server has moved the
    // bytes by then (or the connection is gone, and with it the endpoint).
    im.transact(call, std::move(msg));
  } catch (const Error& e) {
    if (e.code() != GENIE_ERR_UNSUPPORTED) throw;
    log(LogLevel::Debug, "client: tensor ", id, ": ", e.detail(), ": framed transfer");
    return false;
  }
  log(LogLevel::Debug, "client: tensor ", id, ": ", nbytes, " bytes ", write ? "written" : "read", " by RMA over ",
      name);
  return true;
}

}  // namespace genie
