#include "dataplane/ucx/rkey.hpp"

#include <ucs/memory/memory_type.h>

#include <cstdint>
#include <cstring>

#include "core/error.hpp"

namespace genie::dataplane::ucx {

std::string check_packed_key(const std::string& key) {
  uint64_t map = 0;
  if (key.size() < sizeof map + 1 || key.size() > kMaxPackedKey)
    return cat(key.size(), " bytes, where a packed key has ", sizeof map + 1, " to ", kMaxPackedKey);
  std::memcpy(&map, key.data(), sizeof map);  // the packer's byte order: both ends are this build
  if (map == 0) return "it names no memory domain";
  const auto type = static_cast<uint8_t>(key[sizeof map]);
  if (type != UCS_MEMORY_TYPE_HOST) return cat("memory type ", unsigned{type}, ", where only host memory is registered");
  size_t at = sizeof map + 1;
  for (int md = 0; md < 64; ++md) {
    if ((map >> md & 1) == 0) continue;
    if (at >= key.size()) return cat("it ends before the entry of memory domain ", md);
    const size_t len = static_cast<uint8_t>(key[at]);
    if (len > key.size() - at - 1)
      return cat("the ", len, "-byte entry of memory domain ", md, " runs past its end");
    at += 1 + len;
  }
  return {};
}

}  // namespace genie::dataplane::ucx
