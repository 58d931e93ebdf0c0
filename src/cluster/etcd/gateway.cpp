#include "cluster/etcd/gateway.hpp"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/error.hpp"

namespace genie::etcd {

namespace {

void global_init() {
  static const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  check(rc == CURLE_OK, GENIE_ERR_INTERNAL, "libcurl cannot start: ", curl_easy_strerror(rc));
}

size_t to_string(char* data, size_t size, size_t n, void* out) {
  auto* s = static_cast<std::string*>(out);
  // A reply larger than this is no membership reply.
  if (s->size() + size * n > (64u << 20)) return 0;
  s->append(data, size * n);
  return size * n;
}

struct Headers {
  curl_slist* list = curl_slist_append(nullptr, "Content-Type: application/json");
  ~Headers() { curl_slist_free_all(list); }
};

// The options every request has.
void common(CURL* c, const std::string& url, const std::string& body, const Headers& h, int64_t connect_ms) {
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h.list);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_ms));
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  // A peer that vanished without a reset (a partition) is noticed.
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 2L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 1L);
}

// etcd's refusal ({"error": ..., "code": N, "message": ...}) as an Error.
[[noreturn]] void refused(const std::string& path, long http, const std::string& body) {
  Json j(cJSON_ParseWithLength(body.data(), body.size()));
  const cJSON* code = j ? cJSON_GetObjectItemCaseSensitive(j.get(), "code") : nullptr;
  const cJSON* msg = j ? cJSON_GetObjectItemCaseSensitive(j.get(), "message") : nullptr;
  if (!cJSON_IsString(msg) && j) msg = cJSON_GetObjectItemCaseSensitive(j.get(), "error");
  const std::string text = cJSON_IsString(msg) ? msg->valuestring : body.substr(0, 200);
  // gRPC's NotFound (5): a lease that has expired or never was.
  if (cJSON_IsNumber(code) && code->valueint == 5) fail(GENIE_ERR_NOT_FOUND, "etcd ", path, ": ", text);
  fail(GENIE_ERR_PROTOCOL, "etcd ", path, " refused (HTTP ", http, "): ", text);
}

}  // namespace

struct Gateway::Easy {
  CURL* c = curl_easy_init();
  ~Easy() { curl_easy_cleanup(c); }
};

std::string b64(const std::string& raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string unb64(const char* text) {
  if (text == nullptr) return {};
  const size_t len = std::strlen(text);
  check(len % 4 == 0, GENIE_ERR_PROTOCOL, "etcd sent base64 of ", len, " characters");
  std::string out(3 * len / 4 + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text), static_cast<int>(len));
  check(n >= 0, GENIE_ERR_PROTOCOL, "etcd sent bad base64");
  size_t pad = 0;
  if (len >= 1 && text[len - 1] == '=') ++pad;
  if (len >= 2 && text[len - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

int64_t int_field(const cJSON* obj, const char* name, int64_t dflt) {
  const cJSON* f = obj ? cJSON_GetObjectItemCaseSensitive(obj, name) : nullptr;
  if (cJSON_IsString(f)) return std::strtoll(f->valuestring, nullptr, 10);
  if (cJSON_IsNumber(f)) return static_cast<int64_t>(f->valuedouble);
  return dflt;
}

Gateway::Gateway(const std::vector<std::string>& endpoints, int64_t timeout_ms)
    : timeout_ms_(std::max<int64_t>(timeout_ms, 100)) {
  global_init();
  check(!endpoints.empty(), GENIE_ERR_INVALID_ARGUMENT, "etcd: no endpoints given");
  for (std::string e : endpoints) {
    while (!e.empty() && e.back() == '/') e.pop_back();
    check(!e.empty() && e.size() <= 255 && e.find_first_of(" \t\r\n,") == std::string::npos,
          GENIE_ERR_INVALID_ARGUMENT, "etcd endpoint '", e, "' is not a URL");
    if (e.find("://") == std::string::npos) e = "http://" + e;
    check(e.rfind("http://", 0) == 0 || e.rfind("https://", 0) == 0, GENIE_ERR_INVALID_ARGUMENT,
          "etcd endpoint '", e, "': only http:// and https:// are spoken");
    endpoints_.push_back(e);
  }
  easy_ = std::make_unique<Easy>();
  check(easy_->c != nullptr, GENIE_ERR_OUT_OF_MEMORY, "libcurl: no handle");
}

Gateway::~Gateway() = default;

std::string Gateway::endpoints_text() const {
  std::string s;
  for (const auto& e : endpoints_) s += (s.empty() ? "" : ", ") + e;
  return s;
}

Json Gateway::call(const std::string& path, const std::string& body) {
  std::lock_guard<std::mutex> lk(mu_);
  const Headers h;
  std::string last;
  const size_t first = current_.load();
  for (size_t k = 0; k < endpoints_.size(); ++k) {
    const size_t i = (first + k) % endpoints_.size();
    std::string reply;
    CURL* c = easy_->c;
    curl_easy_reset(c);
    common(c, endpoints_[i] + path, body, h, std::min<int64_t>(timeout_ms_, 2000));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms_));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_string);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply);
    const CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
      last = cat(endpoints_[i], ": ", curl_easy_strerror(rc));
      continue;
    }
    current_ = i;
    long http = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
    if (http != 200) refused(path, http, reply);
    Json j(cJSON_ParseWithLength(reply.data(), reply.size()));
    check(j != nullptr, GENIE_ERR_PROTOCOL, "etcd ", path, " answered what is not JSON: ", reply.substr(0, 200));
    return j;
  }
  fail(GENIE_ERR_CONNECTION, "etcd unreachable at ", endpoints_text(), " (", last, ")");
}

namespace {

struct StreamState {
  std::string buf;
  const std::function<bool(const cJSON*)>* on_message;
  const std::atomic<bool>* stop;
  bool ended = false;  // on_message said so
};

size_t on_stream(char* data, size_t size, size_t n, void* p) {
  auto* st = static_cast<StreamState*>(p);
  st->buf.append(data, size * n);
  size_t at = 0;
  while (true) {
    while (at < st->buf.size() && std::isspace(static_cast<unsigned char>(st->buf[at]))) ++at;
    if (at >= st->buf.size()) break;
    const char* end = nullptr;
    Json j(cJSON_ParseWithLengthOpts(st->buf.data() + at, st->buf.size() - at, &end, false));
    if (!j) break;  // not complete yet
    at = static_cast<size_t>(end - st->buf.data());
    if (!(*st->on_message)(j.get())) {
      st->ended = true;
      return 0;
    }
  }
  st->buf.erase(0, at);
  // One watch message is far below this: a stream that never completes an
  // object is not etcd.
  if (st->buf.size() > (16u << 20)) return 0;
  return size * n;
}

int on_progress(void* p, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<StreamState*>(p)->stop->load() ? 1 : 0;
}

}  // namespace

void Gateway::stream(const std::string& path, const std::string& body,
                     const std::function<bool(const cJSON*)>& on_message, const std::atomic<bool>& stop) {
  const Headers h;
  Easy easy;
  check(easy.c != nullptr, GENIE_ERR_OUT_OF_MEMORY, "libcurl: no handle");
  std::string last;
  const size_t first = current_.load();
  for (size_t k = 0; k < endpoints_.size() && !stop; ++k) {
    const size_t i = (first + k) % endpoints_.size();
    StreamState st{{}, &on_message, &stop};
    curl_easy_reset(easy.c);
    common(easy.c, endpoints_[i] + path, body, h, std::min<int64_t>(timeout_ms_, 2000));
    curl_easy_setopt(easy.c, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(easy.c, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(easy.c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(easy.c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(easy.c, CURLOPT_XFERINFODATA, &st);
    const CURLcode rc = curl_easy_perform(easy.c);
    if (st.ended || stop) return;
    long http = 0;
    curl_easy_getinfo(easy.c, CURLINFO_RESPONSE_CODE, &http);
    if (rc == CURLE_OK && http != 200) refused(path, http, st.buf);
    last = cat(endpoints_[i], ": ", rc == CURLE_OK ? "the stream ended" : curl_easy_strerror(rc));
    // It answered, then broke: the caller resumes (from where it got to).
    if (http == 200) break;
  }
  fail(GENIE_ERR_CONNECTION, "etcd watch: ", last.empty() ? "stopped" : last);
}

}  // namespace genie::etcd
