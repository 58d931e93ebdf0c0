// etcd's v3 API through its JSON gateway (the grpc-gateway every etcd v3.4
// server serves on its client URLs: POST /v3/kv/range, /v3/kv/txn,
// /v3/lease/grant, /v3/watch ...), over libcurl. Keys and values travel in
// base64, 64-bit numbers as decimal strings.
//
// Why the gateway and not gRPC stubs from etcd's rpc.proto: the protos
// import gogoproto and the Google API annotations (not packaged beside
// them), gRPC C++ would become a build dependency of its own, and the
// gateway is etcd's own documented, versioned API: JSON in and out, which
// cJSON already reads, over libcurl, which handles HTTP/1.1 chunked
// streaming (watch), keep-alive and timeouts.
#pragma once

#include <cjson/cJSON.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace genie::etcd {

struct JsonDeleter {
  void operator()(cJSON* j) const { cJSON_Delete(j); }
};
using Json = std::unique_ptr<cJSON, JsonDeleter>;

std::string b64(const std::string& raw);
std::string unb64(const char* text);  // "" for null
// A decimal int64 field of `obj` (etcd sends them as strings; a number is
// taken too); `dflt` when absent.
int64_t int_field(const cJSON* obj, const char* name, int64_t dflt = 0);

class Gateway {
 public:
  // `endpoints`: http://host:port URLs (a bare host:port means http).
  // Throws INVALID_ARGUMENT for none or a malformed one.
  Gateway(const std::vector<std::string>& endpoints, int64_t timeout_ms);
  ~Gateway();

  // POSTs `body` (JSON) to `path` at the endpoint that answered last, then
  // at the others in turn; returns the parsed reply. Throws CONNECTION
  // naming every endpoint when none answers, TIMEOUT when one does not
  // answer in time, NOT_FOUND for etcd's NotFound (an expired lease), and
  // PROTOCOL for any other refusal, with etcd's message.
  Json call(const std::string& path, const std::string& body);

  // A stream (POST /v3/watch): `on_message` runs for each JSON object the
  // server sends, on this thread, until it returns false, `stop` is set
  // (seen within about a second), or the connection ends. Throws
  // CONNECTION when no endpoint answers or the stream breaks.
  void stream(const std::string& path, const std::string& body, const std::function<bool(const cJSON*)>& on_message,
              const std::atomic<bool>& stop);

  // "http://a:2379, http://b:2379", for errors.
  std::string endpoints_text() const;

 private:
  struct Easy;
  std::vector<std::string> endpoints_;
  int64_t timeout_ms_;
  std::atomic<size_t> current_{0};
  std::mutex mu_;  // the handle for calls
  std::unique_ptr<Easy> easy_;
};

}  // namespace genie::etcd
