// Node attributes: a small ordered map of typed values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace genie {

enum class AttrType { Int, Float, String, Ints, Floats };

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;

inline AttrType attr_type(const AttrValue& v) { return static_cast<AttrType>(v.index()); }
const char* attr_type_name(AttrType t);

// Ordered so that JSON export and the structural hash are deterministic.
class Attrs {
 public:
  void set(const std::string& key, AttrValue v) { map_[key] = std::move(v); }
  bool has(const std::string& key) const { return map_.count(key) != 0; }
  const std::map<std::string, AttrValue>& all() const { return map_; }

  // Typed getters: return `def` when absent. A present value of another type
  // throws Error(INVALID_ATTRIBUTE) naming the key (validation normally
  // catches this first). get_float accepts an Int value; get_floats accepts Ints.
  int64_t get_int(const std::string& key, int64_t def) const;
  double get_float(const std::string& key, double def) const;
  std::string get_string(const std::string& key, const std::string& def) const;
  std::vector<int64_t> get_ints(const std::string& key, const std::vector<int64_t>& def) const;
  std::vector<double> get_floats(const std::string& key, const std::vector<double>& def) const;

  bool operator==(const Attrs& o) const { return map_ == o.map_; }

 private:
  std::map<std::string, AttrValue> map_;
};

}  // namespace genie
