#include "server/rma.hpp"

#include <unistd.h>

#include <map>
#include <mutex>

#include "core/host.hpp"
#include "dataplane/registry.hpp"

namespace genie {
namespace {

// Registrations of tensor buffers, per transport and buffer; an entry whose
// tensor is gone is dropped (and re-made if its address comes back).
struct CachedRegion {
  std::weak_ptr<TensorData> tensor;
  std::shared_ptr<dataplane::MemoryRegion> region;
};
std::mutex g_mu;
std::map<std::pair<const dataplane::Transport*, const TensorData*>, CachedRegion>& cache() {
  static auto* m = new std::map<std::pair<const dataplane::Transport*, const TensorData*>, CachedRegion>;
  return *m;
}

std::shared_ptr<dataplane::MemoryRegion> tensor_region(dataplane::Transport& t, const TensorPtr& tensor) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto& c = cache();
  for (auto it = c.begin(); it != c.end();) it = it->second.tensor.expired() ? c.erase(it) : std::next(it);
  CachedRegion& e = c[{&t, tensor.get()}];
  if (!e.region) {
    e.tensor = tensor;
    e.region = t.register_memory(tensor->bytes(), tensor->nbytes(), dataplane::MemoryKind::Host);
  }
  return e.region;
}

}  // namespace

void grant_local(const std::string& peer, const TensorData& tensor, wire::TensorAllocReply* reply) {
  // "127.0.0.1:port" or "[::1]:port".
  std::string host = peer.substr(0, peer.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (!is_loopback(host) || !tensor.host_accessible() || tensor.nbytes() == 0) return;
  wire::LocalGrant* g = reply->mutable_grant();
  g->set_pid(static_cast<uint64_t>(::getpid()));
  g->set_address(reinterpret_cast<uint64_t>(tensor.bytes()));
  g->set_length(tensor.nbytes());
}

dataplane::MemoryDescriptor check_rma_region(const std::string& encoded, const std::string& transport,
                                             uint64_t nbytes) {
  dataplane::MemoryDescriptor d;
  try {
    d = dataplane::MemoryDescriptor::decode(encoded);
  } catch (const Error& e) {
    fail(GENIE_ERR_INVALID_ARGUMENT, "the RMA region does not decode: ", e.detail());
  }
  check(d.transport == transport, GENIE_ERR_INVALID_ARGUMENT, "the RMA region is registered with transport '",
        d.transport, "', but this connection runs over '", transport, "'");
  // An empty key is the transport's to judge (loopback needs none; ucx
  // refuses the put/get, and the request gets its detail).
  check(nbytes <= d.length, GENIE_ERR_INVALID_ARGUMENT, "moving ", nbytes,
        " bytes falls outside the RMA region of ", d.length, " bytes");
  return d;
}

void Server::Impl::tensor_rma(const std::shared_ptr<Peer>& p, uint64_t rid, bool write, uint64_t tensor_id,
                              uint64_t offset, uint64_t nbytes, const std::string& region,
                              const dataplane::SemanticTag& tag) {
  Impl& s = *this;
  const std::string& name = p->conn->transport();
  check(p->state == Peer::State::Data, GENIE_ERR_PROTOCOL, "RMA requests go on the data connection");
  std::shared_ptr<dataplane::Transport> t = dataplane::find_transport(name);
  check(t->capabilities().rma, GENIE_ERR_UNSUPPORTED, "the data transport '", name, "' has no RMA");
  check(!p->session->find_remote(tensor_id), GENIE_ERR_UNSUPPORTED, "tensor ", tensor_id,
        " is held by a worker: RMA reaches tensors of this server only");
  TensorPtr tensor = p->session->get(tensor_id);
  if (!tensor->host_accessible())
    fail(GENIE_ERR_UNSUPPORTED, "tensor ", tensor_id, " is in ", served_device_name(*tensor),
         " memory: RMA reaches host memory only (read and write it with TensorRead and TensorWrite)");
  check(offset <= tensor->nbytes() && nbytes <= tensor->nbytes() - offset, GENIE_ERR_SIZE_MISMATCH,
        write ? "writing " : "reading ", nbytes, " bytes at offset ", offset, " overruns tensor ", tensor_id,
        " of ", tensor->nbytes(), " bytes");
  const dataplane::MemoryDescriptor remote = check_rma_region(region, name, nbytes);
  if (nbytes == 0) return s.send(*p, wire::MsgType::Ok, rid, wire::Ok());
  auto local = tensor_region(*t, tensor);
  std::weak_ptr<Peer> wp = p;
  auto done = [&s, wp, rid, tensor, local, write, tag, nbytes](genie_status_t st, const std::string& why) {
    if (st == GENIE_OK) s.count_tagged(write ? "write" : "read", tag, nbytes);
    auto peer = wp.lock();
    if (!peer || peer->closing) return;
    if (st == GENIE_OK)
      s.send(*peer, wire::MsgType::Ok, rid, wire::Ok());
    else
      s.send_error(*peer, rid, st, why);
  };
  if (write)
    p->conn->channel()->get(local, offset, remote, 0, nbytes, std::move(done));
  else
    p->conn->channel()->put(local, offset, remote, 0, nbytes, std::move(done));
}

}  // namespace genie
