#include "control/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "core/error.hpp"

namespace genie {

std::string hmac_sha256(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len) == nullptr)
    fail(GENIE_ERR_INTERNAL, "HMAC-SHA256 failed in libcrypto");
  return std::string(reinterpret_cast<const char*>(out), len);
}

namespace {

// What a proof covers: a label saying what for, then the fields, each
// length-prefixed so that no two different contexts encode alike; the
// channel binding last, and only on a channel that has one (so a proof
// without TLS is what protocol 3 always had).
std::string context(const char* label, const std::string& nonce, uint64_t session_id,
                    const std::string& extra, const std::string& binding) {
  std::string s = label;
  s.push_back('\0');
  s += nonce;
  for (int i = 7; i >= 0; --i) s.push_back(static_cast<char>(session_id >> (8 * i)));
  s.push_back(static_cast<char>(extra.size() & 0xff));
  s += extra;
  if (!binding.empty()) s.append("\0tls-exporter", 13).append(binding);
  return s;
}

}  // namespace

std::string token_proof(const std::string& token, const std::string& nonce, const std::string& node_id,
                        const std::string& binding) {
  // The nonce and node id as protocol 3 always had them, then the binding.
  std::string data = nonce + node_id;
  if (!binding.empty()) data.append("\0tls-exporter", 13).append(binding);
  return hmac_sha256(token, data);
}

std::string data_proof(const std::string& secret, const std::string& nonce, uint64_t session_id,
                       const std::string& transport, const std::string& binding) {
  return hmac_sha256(secret, context("genie data connection v3", nonce, session_id, transport, binding));
}

std::string resume_proof(const std::string& secret, const std::string& nonce, uint64_t session_id,
                         const std::string& node_id, const std::string& binding) {
  return hmac_sha256(secret, context("genie session resumption v3", nonce, session_id, node_id, binding));
}

bool mac_equal(const std::string& a, const std::string& b) {
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string random_bytes(size_t n) {
  std::string s(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(s.data()), static_cast<int>(n)) != 1)
    fail(GENIE_ERR_INTERNAL, "RAND_bytes failed: no entropy for a nonce or session token");
  return s;
}

}  // namespace genie
