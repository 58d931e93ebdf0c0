// The interface's out-of-line pieces. Plugins compile this file into
// themselves (dataplane/CMakeLists.txt), so that libgenie exports nothing
// but the C API.
#include "dataplane/transport.hpp"

#include <cstring>

#include "core/error.hpp"
#include "dataplane/resolve.hpp"

namespace genie::dataplane {
namespace {

// Descriptor encoding: "GMRD", a version byte, then little-endian fields
// and two length-prefixed strings.
constexpr char kDescMagic[4] = {'G', 'M', 'R', 'D'};
constexpr uint8_t kDescVersion = 1;
constexpr uint32_t kMaxDescString = 1u << 16;

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

struct Reader {
  const std::string& in;
  size_t pos = 0;

  void need(size_t n, const char* what) {
    if (in.size() - pos < n) {
      fail(GENIE_ERR_PROTOCOL, "memory descriptor of ", in.size(), " bytes ends inside its ", what);
    }
  }
  uint64_t le(int bytes, const char* what) {
    need(static_cast<size_t>(bytes), what);
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i)
      v = (v << 8) | static_cast<uint8_t>(in[pos + static_cast<size_t>(i)]);
    pos += static_cast<size_t>(bytes);
    return v;
  }
  std::string str(const char* what) {
    const uint64_t n = le(4, what);
    if (n > kMaxDescString)
      fail(GENIE_ERR_PROTOCOL, "memory descriptor's ", what, " of ", n, " bytes is too long");
    need(n, what);
    std::string s = in.substr(pos, n);
    pos += n;
    return s;
  }
};

void answer(const Channel::RmaDone& done, genie_status_t status, const std::string& detail) {
  if (done) done(status, detail);
}

}  // namespace

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Host: return "host";
    case MemoryKind::PinnedHost: return "pinned host";
    case MemoryKind::Device: return "device";
  }
  return "unknown";
}

std::string MemoryDescriptor::encode() const {
  std::string out(kDescMagic, sizeof kDescMagic);
  out.push_back(static_cast<char>(kDescVersion));
  out.push_back(static_cast<char>(kind));
  put_le(out, static_cast<uint32_t>(device), 4);
  put_le(out, address, 8);
  put_le(out, length, 8);
  put_le(out, transport.size(), 4);
  out += transport;
  put_le(out, key.size(), 4);
  out += key;
  return out;
}

MemoryDescriptor MemoryDescriptor::decode(const std::string& bytes) {
  Reader r{bytes};
  r.need(sizeof kDescMagic + 2, "header");
  if (std::memcmp(bytes.data(), kDescMagic, sizeof kDescMagic) != 0) {
    fail(GENIE_ERR_PROTOCOL, "not a memory descriptor (bad magic)");
  }
  r.pos = sizeof kDescMagic;
  const auto version = static_cast<uint8_t>(r.le(1, "version"));
  if (version != kDescVersion) {
    fail(GENIE_ERR_PROTOCOL, "memory descriptor version ", unsigned{version}, ", this build reads version ",
         unsigned{kDescVersion});
  }
  MemoryDescriptor d;
  const auto kind = static_cast<uint8_t>(r.le(1, "kind"));
  if (kind > static_cast<uint8_t>(MemoryKind::Device))
    fail(GENIE_ERR_PROTOCOL, "memory descriptor of unknown kind ", unsigned{kind});
  d.kind = static_cast<MemoryKind>(kind);
  d.device = static_cast<int32_t>(static_cast<uint32_t>(r.le(4, "device")));
  d.address = r.le(8, "address");
  d.length = r.le(8, "length");
  d.transport = r.str("transport name");
  d.key = r.str("key");
  if (r.pos != bytes.size())
    fail(GENIE_ERR_PROTOCOL, "memory descriptor has ", bytes.size() - r.pos, " trailing bytes");
  return d;
}

MemoryRegion::~MemoryRegion() = default;
Channel::~Channel() = default;
Listener::~Listener() = default;
Transport::~Transport() = default;

std::unique_ptr<BlockingChannel> Transport::connect_blocking(const std::string& address,
                                                             const ChannelOptions&, Deadline) {
  fail(GENIE_ERR_UNSUPPORTED, "transport '", capabilities().name,
       "' has no blocking channels (connecting to ", address, ")");
}

void Channel::put(const std::shared_ptr<MemoryRegion>&, uint64_t, const MemoryDescriptor&, uint64_t, uint64_t,
                  RmaDone done) {
  answer(done, GENIE_ERR_UNSUPPORTED,
         "this transport has no remote memory access (put); send a frame instead");
}

void Channel::get(const std::shared_ptr<MemoryRegion>&, uint64_t, const MemoryDescriptor&, uint64_t, uint64_t,
                  RmaDone done) {
  answer(done, GENIE_ERR_UNSUPPORTED,
         "this transport has no remote memory access (get); send a frame instead");
}

MemoryDescriptor describe_host_memory(const std::string& transport, const char* how, void* data,
                                      uint64_t length, MemoryKind kind, int32_t device) {
  if (data == nullptr || length == 0) {
    fail(GENIE_ERR_INVALID_ARGUMENT, "cannot register ", length, " bytes at ", data, ": empty range");
  }
  if (kind != MemoryKind::Host) {
    fail(GENIE_ERR_UNSUPPORTED, "the ", transport, " transport cannot register ", memory_kind_name(kind),
         " memory: it ", how, " (stage through host memory, or use a transport with gpu_memory)");
  }
  MemoryDescriptor d;
  d.transport = transport;
  d.kind = kind;
  d.device = device;
  d.address = reinterpret_cast<uintptr_t>(data);
  d.length = length;
  return d;
}

void split_address(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    fail(GENIE_ERR_INVALID_ARGUMENT, "address '", address, "' has no port (want host:port)");
  }
  const std::string p = address.substr(colon + 1);
  if (p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos || std::stoi(p) > 65535) {
    fail(GENIE_ERR_INVALID_ARGUMENT, "address '", address, "': port '", p, "' is not a number in 0..65535");
  }
  std::string h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  *host = h;
  *port = std::stoi(p);
}

AddrInfo resolve_address(const std::string& address, bool passive, std::string* error) {
  std::string host;
  int port = 0;
  split_address(address, &host, &port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    *error = rc != 0 ? ::gai_strerror(rc) : "no address";
    return AddrInfo(nullptr, ::freeaddrinfo);
  }
  return AddrInfo(res, ::freeaddrinfo);
}

}  // namespace genie::dataplane
