// Shared-secret authentication of the handshake (docs/protocol.md): HMAC-
// SHA256 challenge-response, and the random nonces and session tokens.
#pragma once

#include <cstddef>
#include <string>

namespace genie {

// HMAC-SHA256 of `data` keyed with `key` (32 bytes). Throws Error(INTERNAL)
// if libcrypto fails.
std::string hmac_sha256(const std::string& key, const std::string& data);

// `n` bytes from the system's cryptographic random source. Throws
// Error(INTERNAL) when none is available.
std::string random_bytes(size_t n);

}  // namespace genie
