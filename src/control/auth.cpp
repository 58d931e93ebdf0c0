#include "control/auth.hpp"

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

std::string random_bytes(size_t n) {
  std::string s(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(s.data()), static_cast<int>(n)) != 1)
    fail(GENIE_ERR_INTERNAL, "RAND_bytes failed: no entropy for a nonce or session token");
  return s;
}

}  // namespace genie
