#include "graph/attrs.hpp"

#include "core/error.hpp"

namespace genie {

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::Int: return "int";
    case AttrType::Float: return "float";
    case AttrType::String: return "string";
    case AttrType::Ints: return "ints";
    case AttrType::Floats: return "floats";
  }
  return "?";
}

namespace {
[[noreturn]] void wrong_type(const std::string& key, AttrType want, const AttrValue& got) {
  fail(GENIE_ERR_INVALID_ATTRIBUTE, "attribute '", key, "' must be ", attr_type_name(want), ", got ",
       attr_type_name(attr_type(got)));
}
}  // namespace

int64_t Attrs::get_int(const std::string& key, int64_t def) const {
  auto it = map_.find(key);
  if (it == map_.end()) return def;
  if (auto* v = std::get_if<int64_t>(&it->second)) return *v;
  wrong_type(key, AttrType::Int, it->second);
}

double Attrs::get_float(const std::string& key, double def) const {
  auto it = map_.find(key);
  if (it == map_.end()) return def;
  if (auto* v = std::get_if<double>(&it->second)) return *v;
  if (auto* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
  wrong_type(key, AttrType::Float, it->second);
}

std::string Attrs::get_string(const std::string& key, const std::string& def) const {
  auto it = map_.find(key);
  if (it == map_.end()) return def;
  if (auto* v = std::get_if<std::string>(&it->second)) return *v;
  wrong_type(key, AttrType::String, it->second);
}

std::vector<int64_t> Attrs::get_ints(const std::string& key, const std::vector<int64_t>& def) const {
  auto it = map_.find(key);
  if (it == map_.end()) return def;
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  wrong_type(key, AttrType::Ints, it->second);
}

std::vector<double> Attrs::get_floats(const std::string& key, const std::vector<double>& def) const {
  auto it = map_.find(key);
  if (it == map_.end()) return def;
  if (auto* v = std::get_if<std::vector<double>>(&it->second)) return *v;
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return {v->begin(), v->end()};
  wrong_type(key, AttrType::Floats, it->second);
}

}  // namespace genie
