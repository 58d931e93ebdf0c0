#include "sched/profile_cache.hpp"

#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace genie::sched {

namespace {

// Version of the file's format; a file of another version is measured again
// and rewritten (2, 3: vector_flops added, memcpy beyond the last-level
// cache; 4: device kind, model and units for any backend).
constexpr int kCacheVersion = 4;

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
}

}  // namespace

std::string profile_cache_dir(const CalibrateOptions& o) {
  if (!o.cache_dir.empty()) return o.cache_dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/genie";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/genie";
  return "";
}

std::string profile_cache_file(const std::string& dir, const DeviceIdentity& id) {
  if (dir.empty()) return "";
  uint64_t key = 0xcbf29ce484222325ull;
  for (unsigned char ch : id.model + "/" + std::to_string(id.units)) key = (key ^ ch) * 0x100000001b3ull;
  char name[40];
  std::snprintf(name, sizeof name, "-%016llx.json", static_cast<unsigned long long>(key));
  return dir + "/" + id.kind + name;
}

bool read_profile_cache(const std::string& file, const DeviceIdentity& id, MeasuredRates* out) {
  std::string text;
  if (!read_text_file(file, &text)) return false;
  cJSON* root = cJSON_ParseWithLength(text.data(), text.size());
  if (!root) return false;
  bool ok = false;
  const cJSON* ver = cJSON_GetObjectItemCaseSensitive(root, "version");
  const cJSON* k = cJSON_GetObjectItemCaseSensitive(root, "kind");
  const cJSON* m = cJSON_GetObjectItemCaseSensitive(root, "model");
  const cJSON* u = cJSON_GetObjectItemCaseSensitive(root, "units");
  const cJSON* f = cJSON_GetObjectItemCaseSensitive(root, "peak_flops");
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(root, "vector_flops");
  const cJSON* b = cJSON_GetObjectItemCaseSensitive(root, "mem_bw_bytes_per_s");
  if (cJSON_IsNumber(ver) && ver->valuedouble == kCacheVersion && cJSON_IsString(k) &&
      id.kind == k->valuestring && cJSON_IsString(m) && id.model == m->valuestring && cJSON_IsNumber(u) &&
      u->valuedouble == id.units && cJSON_IsNumber(f) && f->valuedouble > 0 && cJSON_IsNumber(v) &&
      v->valuedouble > 0 && cJSON_IsNumber(b) && b->valuedouble > 0) {
    out->peak_flops = f->valuedouble;
    out->vector_flops = v->valuedouble;
    out->mem_bw_bytes_per_s = b->valuedouble;
    ok = true;
  }
  cJSON_Delete(root);
  return ok;
}

void write_profile_cache(const std::string& dir, const std::string& file, const DeviceIdentity& id,
                         const MeasuredRates& r) {
  make_dirs(dir);
  cJSON* root = cJSON_CreateObject();
  if (!root) return;
  cJSON_AddNumberToObject(root, "version", kCacheVersion);
  cJSON_AddStringToObject(root, "kind", id.kind.c_str());
  cJSON_AddStringToObject(root, "model", id.model.c_str());
  cJSON_AddNumberToObject(root, "units", id.units);
  cJSON_AddNumberToObject(root, "peak_flops", r.peak_flops);
  cJSON_AddNumberToObject(root, "vector_flops", r.vector_flops);
  cJSON_AddNumberToObject(root, "mem_bw_bytes_per_s", r.mem_bw_bytes_per_s);
  char* text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) return;
  write_text_file(file, std::string(text) + "\n");
  cJSON_free(text);
}

bool read_text_file(const std::string& file, std::string* out) {
  std::ifstream in(file);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return false;
  *out = ss.str();
  return true;
}

bool write_text_file(const std::string& file, const std::string& text) {
  if (const size_t slash = file.rfind('/'); slash != std::string::npos && slash > 0)
    make_dirs(file.substr(0, slash));
  const std::string tmp = file + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), file.c_str()) == 0) return true;
  std::remove(tmp.c_str());
  return false;
}

}  // namespace genie::sched
