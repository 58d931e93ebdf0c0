// Checks on a peer's remote key before this side uses it (docs/ucx.md,
// "Trust"): ucp_ep_rkey_unpack takes no length and trusts the packed layout,
// so a key is walked here first, within its bytes.
#pragma once

#include <string>

namespace genie::dataplane::ucx {

// Keys larger than this are refused: a packed key is a few bytes per memory
// domain (tens of bytes here, a few hundred with several RDMA devices).
constexpr size_t kMaxPackedKey = 1024;

// Why the packed key `key` is refused, or empty when its layout holds:
// ucp_rkey_pack's layout in UCX 1.x, a 64-bit map of memory domains, a
// memory-type byte (host memory only: this transport registers nothing
// else), then for each domain in the map a length byte and that many bytes,
// all within the key and at most kMaxPackedKey bytes.
std::string check_packed_key(const std::string& key);

}  // namespace genie::dataplane::ucx
