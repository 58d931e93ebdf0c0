// Shared-secret authentication of the handshake (docs/protocol.md): HMAC-
// SHA256 challenge-response, and the random nonces and session tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace genie {

// HMAC-SHA256 of `data` keyed with `key` (32 bytes). Throws Error(INTERNAL)
// if libcrypto fails.
std::string hmac_sha256(const std::string& key, const std::string& data);

// The proofs (docs/protocol.md, "Authentication" and "Sessions"), each
// bound to a fresh nonce of the server's, to what the connection is for, and
// to the channel it travels on (`binding`: Channel::channel_binding, the TLS
// exporter; empty without TLS), so that an answer captured on one
// connection, or relayed from another TLS connection, proves nothing:
// node `node_id` holding the shared token; a data connection joining session
// `session_id` over `transport`; a control connection of node `node_id`
// resuming it.
std::string token_proof(const std::string& token, const std::string& nonce, const std::string& node_id,
                        const std::string& binding);
std::string data_proof(const std::string& secret, const std::string& nonce, uint64_t session_id,
                       const std::string& transport, const std::string& binding);
std::string resume_proof(const std::string& secret, const std::string& nonce, uint64_t session_id,
                         const std::string& node_id, const std::string& binding);

// Constant-time comparison of two MACs (false for different lengths).
bool mac_equal(const std::string& a, const std::string& b);

// `n` bytes from the system's cryptographic random source. Throws
// Error(INTERNAL) when none is available.
std::string random_bytes(size_t n);

}  // namespace genie
