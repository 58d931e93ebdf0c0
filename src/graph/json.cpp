// JSON codec for graphs; docs/graph-format.md is the format's reference.
//
// cJSON holds every number as a double, which cannot keep all int64 values
// or tell 1.0 from 1, and prints doubles with an approximate round-trip
// check. So numbers are written by this file (std::to_chars: exact, shortest,
// locale-independent) as raw items, attributes carry their type explicitly,
// and integers beyond 2^53 travel as decimal strings.
#include <cjson/cJSON.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <set>

#include "core/error.hpp"
#include "graph/graph.hpp"

namespace genie {

namespace {

static_assert(std::endian::native == std::endian::little, "constant data is stored little-endian");

constexpr const char* kFormatName = "genie.graph";
constexpr int64_t kFormatVersion = 1;
// Integers up to this magnitude survive any JSON reader (they are exact as
// doubles, and no larger integer rounds onto them).
constexpr int64_t kMaxSafeInt = (int64_t{1} << 53) - 1;

struct JsonDelete {
  void operator()(cJSON* j) const { cJSON_Delete(j); }
};
using JsonPtr = std::unique_ptr<cJSON, JsonDelete>;
struct JsonFree {
  void operator()(char* p) const { cJSON_free(p); }
};

// ---------------------------------------------------------------------------
// Base64 (RFC 4648, standard alphabet, padded).
// ---------------------------------------------------------------------------

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_len(size_t n) { return (n + 2) / 3 * 4; }

std::string base64_encode(const std::byte* p, size_t n) {
  std::string out;
  out.reserve(base64_len(n));
  for (size_t i = 0; i < n; i += 3) {
    uint32_t w = static_cast<uint32_t>(p[i]) << 16;
    if (i + 1 < n) w |= static_cast<uint32_t>(p[i + 1]) << 8;
    if (i + 2 < n) w |= static_cast<uint32_t>(p[i + 2]);
    out += kB64[(w >> 18) & 63];
    out += kB64[(w >> 12) & 63];
    out += i + 1 < n ? kB64[(w >> 6) & 63] : '=';
    out += i + 2 < n ? kB64[w & 63] : '=';
  }
  return out;
}

// Decodes exactly n bytes from text of length base64_len(n). Strict: padding
// only where n requires it and unused bits zero, so each byte string has
// one encoding.
bool base64_decode(const std::string& text, std::byte* out, size_t n) {
  auto digit = [](char c) -> int {
    const char* p = c ? std::strchr(kB64, c) : nullptr;
    return p ? static_cast<int>(p - kB64) : -1;
  };
  for (size_t i = 0, o = 0; o < n; i += 4, o += 3) {
    const size_t have = std::min<size_t>(3, n - o);
    uint32_t w = 0;
    for (size_t k = 0; k < 4; ++k) {
      const bool pad = k > have;
      const int d = pad ? 0 : digit(text[i + k]);
      if (d < 0 || (pad && text[i + k] != '=')) return false;
      w = (w << 6) | static_cast<uint32_t>(d);
    }
    if (have < 3 && (w & ((1u << (8 * (3 - have))) - 1)) != 0) return false;
    for (size_t k = 0; k < have; ++k) out[o + k] = static_cast<std::byte>(w >> (16 - 8 * k));
  }
  return true;
}

// ---------------------------------------------------------------------------
// Writing.
// ---------------------------------------------------------------------------

// Attaches a freshly created item (nullptr when cJSON ran out of memory) to
// an object (key) or array (no key); the parent then owns it.
cJSON* add(cJSON* parent, const char* key, cJSON* item) {
  check(item != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory writing JSON");
  if (!(key ? cJSON_AddItemToObject(parent, key, item) : cJSON_AddItemToArray(parent, item))) {
    cJSON_Delete(item);
    fail(GENIE_ERR_OUT_OF_MEMORY, "out of memory writing JSON");
  }
  return item;
}

cJSON* json_int(int64_t v) {
  char buf[24];
  *std::to_chars(buf, buf + sizeof buf - 1, v).ptr = '\0';
  return v > kMaxSafeInt || v < -kMaxSafeInt ? cJSON_CreateString(buf) : cJSON_CreateRaw(buf);
}

cJSON* json_float(double d) {
  if (std::isnan(d)) return cJSON_CreateString("nan");
  if (std::isinf(d)) return cJSON_CreateString(d > 0 ? "inf" : "-inf");
  char buf[32];
  *std::to_chars(buf, buf + sizeof buf - 1, d).ptr = '\0';
  return cJSON_CreateRaw(buf);
}

void put_string(cJSON* parent, const char* key, const std::string& s) {
  add(parent, key, cJSON_CreateString(s.c_str()));
}

void put_ints(cJSON* parent, const char* key, const std::vector<int64_t>& v) {
  cJSON* arr = add(parent, key, cJSON_CreateArray());
  for (int64_t x : v) add(arr, nullptr, json_int(x));
}

void put_attr(cJSON* attrs, const std::string& key, const AttrValue& value) {
  cJSON* o = add(attrs, key.c_str(), cJSON_CreateObject());
  const char* type = attr_type_name(attr_type(value));
  if (auto* i = std::get_if<int64_t>(&value)) add(o, type, json_int(*i));
  if (auto* d = std::get_if<double>(&value)) add(o, type, json_float(*d));
  if (auto* s = std::get_if<std::string>(&value)) put_string(o, type, *s);
  if (auto* is = std::get_if<std::vector<int64_t>>(&value)) put_ints(o, type, *is);
  if (auto* ds = std::get_if<std::vector<double>>(&value)) {
    cJSON* arr = add(o, type, cJSON_CreateArray());
    for (double d : *ds) add(arr, nullptr, json_float(d));
  }
}

void put_annotations(cJSON* node, const Annotations& a) {
  if (a == Annotations{}) return;
  cJSON* o = add(node, "annotations", cJSON_CreateObject());
  if (a.phase != Phase::Unknown) put_string(o, "phase", phase_name(a.phase));
  if (!a.module_path.empty()) put_string(o, "module", a.module_path);
  if (a.layer != -1) add(o, "layer", json_int(a.layer));
  if (a.modality != Modality::Unknown) put_string(o, "modality", modality_name(a.modality));
}

// ---------------------------------------------------------------------------
// Reading. Every structural error names its JSON path ("nodes[3].attrs.axis").
// ---------------------------------------------------------------------------

template <class... Parts>
[[noreturn]] void bad(const std::string& path, Parts&&... parts) {
  fail(GENIE_ERR_PARSE, path.empty() ? "top level" : path, ": ", std::forward<Parts>(parts)...);
}

std::string member_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}
std::string index_path(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

const char* kind_of(const cJSON* j) {
  if (cJSON_IsObject(j)) return "an object";
  if (cJSON_IsArray(j)) return "an array";
  if (cJSON_IsString(j)) return "a string";
  if (cJSON_IsNumber(j)) return "a number";
  if (cJSON_IsBool(j)) return "a boolean";
  return "null";
}

// Runs a building call, adding the JSON path to its error.
template <class F>
auto at(const std::string& path, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(e.code(), cat(path, ": ", e.detail()));
  }
}

// An object whose keys are all distinct (and, when `keys` is not empty, all
// among `keys`: a misspelt key is an error, not silently ignored).
void expect_object(const cJSON* j, const std::string& path, std::initializer_list<const char*> keys) {
  if (!cJSON_IsObject(j)) bad(path, "expected an object, got ", kind_of(j));
  std::set<std::string> seen;
  for (const cJSON* c = j->child; c; c = c->next) {
    const std::string key = c->string;
    if (keys.size() && std::none_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; })) {
      std::string known;
      for (const char* k : keys) known += cat(known.empty() ? "" : ", ", k);
      bad(member_path(path, key), "unknown key (expected ", known, ")");
    }
    if (!seen.insert(key).second) bad(member_path(path, key), "duplicate key");
  }
}

const cJSON* required_member(const cJSON* obj, const char* key, const std::string& path) {
  const cJSON* m = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!m) bad(member_path(path, key), "missing");
  return m;
}

std::string get_string(const cJSON* j, const std::string& path) {
  if (!cJSON_IsString(j)) bad(path, "expected a string, got ", kind_of(j));
  return j->valuestring;
}

// A number with an integral value within +-(2^53 - 1), or a decimal string
// for any int64. `too_large` is the status for larger integral numbers.
int64_t get_int(const cJSON* j, const std::string& path, genie_status_t too_large = GENIE_ERR_PARSE) {
  if (cJSON_IsString(j)) {
    const char* s = j->valuestring;
    const char* end = s + std::strlen(s);
    int64_t v = 0;
    const auto r = std::from_chars(s, end, v);
    if (r.ec != std::errc() || r.ptr != end) bad(path, "expected an integer, got \"", s, "\"");
    return v;
  }
  if (!cJSON_IsNumber(j)) bad(path, "expected an integer, got ", kind_of(j));
  const double d = j->valuedouble;
  if (!std::isfinite(d) || d != std::floor(d)) bad(path, "expected an integer, got ", d);
  if (std::fabs(d) > static_cast<double>(kMaxSafeInt))
    fail(too_large, path, ": integer ", d,
         " is beyond +-(2^53 - 1) (write larger integers as decimal strings)");
  return static_cast<int64_t>(d);
}

double get_float(const cJSON* j, const std::string& path) {
  if (cJSON_IsString(j)) {
    const std::string s = j->valuestring;
    if (s == "nan") return std::nan("");
    if (s == "inf") return HUGE_VAL;
    if (s == "-inf") return -HUGE_VAL;
    bad(path, "expected a number, \"nan\", \"inf\" or \"-inf\", got \"", s, "\"");
  }
  if (!cJSON_IsNumber(j)) bad(path, "expected a number, got ", kind_of(j));
  if (!std::isfinite(j->valuedouble)) bad(path, "number out of range (write \"inf\" or \"-inf\")");
  return j->valuedouble;
}

template <class F>
void for_each_item(const cJSON* j, const std::string& path, F&& f) {
  if (!cJSON_IsArray(j)) bad(path, "expected an array, got ", kind_of(j));
  size_t i = 0;
  for (const cJSON* c = j->child; c; c = c->next, ++i) f(c, index_path(path, i));
}

std::vector<std::string> get_strings(const cJSON* j, const std::string& path) {
  std::vector<std::string> out;
  for_each_item(j, path, [&](const cJSON* c, const std::string& p) { out.push_back(get_string(c, p)); });
  return out;
}

Shape get_shape(const cJSON* j, const std::string& path) {
  Shape out;
  for_each_item(j, path, [&](const cJSON* c, const std::string& p) {
    check(out.size() < GENIE_MAX_DIMS, GENIE_ERR_INVALID_ARGUMENT, path, ": more than ", GENIE_MAX_DIMS,
          " dimensions");
    out.push_back(get_int(c, p, GENIE_ERR_TOO_LARGE));
  });
  return out;
}

DType get_dtype(const cJSON* j, const std::string& path) {
  const std::string name = get_string(j, path);
  const auto t = dtype_from_name(name);
  if (!t) bad(path, "unknown dtype \"", name, "\" (expected f32, f16, bf16, i32, i64 or bool)");
  return *t;
}

AttrValue get_attr(const cJSON* j, const std::string& path) {
  if (!cJSON_IsObject(j) || !j->child || j->child->next)
    bad(path, "expected an object with one key: int, float, string, ints or floats");
  const cJSON* v = j->child;
  const std::string type = v->string;
  const std::string p = member_path(path, type);
  if (type == "int") return get_int(v, p);
  if (type == "float") return get_float(v, p);
  if (type == "string") return get_string(v, p);
  if (type == "ints") {
    std::vector<int64_t> out;
    for_each_item(v, p, [&](const cJSON* c, const std::string& cp) { out.push_back(get_int(c, cp)); });
    return out;
  }
  if (type == "floats") {
    std::vector<double> out;
    for_each_item(v, p, [&](const cJSON* c, const std::string& cp) { out.push_back(get_float(c, cp)); });
    return out;
  }
  bad(p, "unknown attribute type (expected int, float, string, ints or floats)");
}

template <class E>
E get_enum(const cJSON* j, const std::string& path, std::optional<E> (*from_name)(const std::string&)) {
  const std::string s = get_string(j, path);
  const std::optional<E> e = from_name(s);
  if (!e) bad(path, "unknown value \"", s, "\"");
  return *e;
}

void read_input(Graph& g, const cJSON* j, const std::string& path) {
  expect_object(j, path, {"name", "dtype", "shape"});
  const std::string name = get_string(required_member(j, "name", path), member_path(path, "name"));
  const DType dtype = get_dtype(required_member(j, "dtype", path), member_path(path, "dtype"));
  const Shape shape = get_shape(required_member(j, "shape", path), member_path(path, "shape"));
  at(path, [&] { g.add_input(name, dtype, shape); });
}

void read_constant(Graph& g, const cJSON* j, const std::string& path) {
  expect_object(j, path, {"name", "dtype", "shape", "data"});
  const std::string name = get_string(required_member(j, "name", path), member_path(path, "name"));
  const DType dtype = get_dtype(required_member(j, "dtype", path), member_path(path, "dtype"));
  const Shape shape = get_shape(required_member(j, "shape", path), member_path(path, "shape"));
  const std::string data_path = member_path(path, "data");
  const std::string data = get_string(required_member(j, "data", path), data_path);
  // Sizes are checked before anything is allocated.
  const size_t nbytes = at(path, [&] { return byte_size(shape, dtype_size(dtype)); });
  if (data.size() != base64_len(nbytes))
    fail(GENIE_ERR_SIZE_MISMATCH, data_path, ": ", data.size(), " base64 characters, but ", dtype_name(dtype),
         shape_str(shape), " needs ", nbytes, " bytes (", base64_len(nbytes), " characters)");
  // Every byte is decoded into it before anyone reads it: no zeroing.
  auto tensor = at(path, [&] { return std::make_shared<TensorData>(dtype, shape, TensorData::Uninitialized{}); });
  if (!base64_decode(data, tensor->bytes(), nbytes)) bad(data_path, "invalid base64");
  at(path, [&] { g.add_constant(name, std::move(tensor)); });
}

void read_node(Graph& g, const cJSON* j, const std::string& path) {
  expect_object(j, path, {"name", "op", "inputs", "outputs", "attrs", "annotations"});
  const std::string name = get_string(required_member(j, "name", path), member_path(path, "name"));
  const std::string op = get_string(required_member(j, "op", path), member_path(path, "op"));
  const auto inputs = get_strings(required_member(j, "inputs", path), member_path(path, "inputs"));
  const auto outputs = get_strings(required_member(j, "outputs", path), member_path(path, "outputs"));
  const NodeId id = at(path, [&] { return g.add_node(op, name, inputs, outputs); });

  if (const cJSON* attrs = cJSON_GetObjectItemCaseSensitive(j, "attrs")) {
    const std::string attrs_path = member_path(path, "attrs");
    expect_object(attrs, attrs_path, {});
    for (const cJSON* a = attrs->child; a; a = a->next) {
      const std::string p = member_path(attrs_path, a->string);
      AttrValue v = get_attr(a, p);
      at(p, [&] { g.set_attr(name, a->string, std::move(v)); });
    }
  }
  if (const cJSON* ann = cJSON_GetObjectItemCaseSensitive(j, "annotations")) {
    const std::string p = member_path(path, "annotations");
    expect_object(ann, p, {"phase", "module", "layer", "modality"});
    Annotations a;
    if (const cJSON* v = cJSON_GetObjectItemCaseSensitive(ann, "phase"))
      a.phase = get_enum<Phase>(v, member_path(p, "phase"), phase_from_name);
    if (const cJSON* v = cJSON_GetObjectItemCaseSensitive(ann, "module"))
      a.module_path = get_string(v, member_path(p, "module"));
    if (const cJSON* v = cJSON_GetObjectItemCaseSensitive(ann, "layer")) {
      const int64_t layer = get_int(v, member_path(p, "layer"));
      if (layer < -1 || layer > INT32_MAX) bad(member_path(p, "layer"), "layer ", layer, " out of range");
      a.layer = static_cast<int32_t>(layer);
    }
    if (const cJSON* v = cJSON_GetObjectItemCaseSensitive(ann, "modality"))
      a.modality = get_enum<Modality>(v, member_path(p, "modality"), modality_from_name);
    g.node(id).ann = std::move(a);
  }
}

std::unique_ptr<Graph> read_graph(const cJSON* root) {
  expect_object(root, "", {"format", "version", "name", "inputs", "constants", "nodes", "outputs", "roles"});
  if (const cJSON* f = cJSON_GetObjectItemCaseSensitive(root, "format"))
    if (get_string(f, "format") != kFormatName) bad("format", "expected \"", kFormatName, "\"");
  const int64_t version = get_int(required_member(root, "version", ""), "version");
  if (version != kFormatVersion)
    bad("version", "format version ", version, " is not supported (this library reads ", kFormatVersion, ")");

  auto g = std::make_unique<Graph>();
  if (const cJSON* n = cJSON_GetObjectItemCaseSensitive(root, "name")) {
    std::string name = get_string(n, "name");
    if (!name.empty()) at("name", [&] { check_name(name, "graph name"); });
    g->set_name(std::move(name));
  }
  auto section = [root](const char* key, auto&& read) {
    if (const cJSON* s = cJSON_GetObjectItemCaseSensitive(root, key)) for_each_item(s, key, read);
  };
  section("inputs", [&](const cJSON* j, const std::string& p) { read_input(*g, j, p); });
  section("constants", [&](const cJSON* j, const std::string& p) { read_constant(*g, j, p); });
  section("nodes", [&](const cJSON* j, const std::string& p) { read_node(*g, j, p); });
  section("outputs", [&](const cJSON* j, const std::string& p) {
    const std::string name = get_string(j, p);
    at(p, [&] { g->mark_output(name); });
  });
  if (const cJSON* roles = cJSON_GetObjectItemCaseSensitive(root, "roles")) {
    expect_object(roles, "roles", {});
    for (const cJSON* r = roles->child; r; r = r->next) {
      const std::string p = member_path("roles", r->string);
      const TensorRole role = get_enum<TensorRole>(r, p, role_from_name);
      const ValueId id = g->find_value(r->string);
      check(id != kNone, GENIE_ERR_NOT_FOUND, p, ": no value named '", r->string, "'");
      g->value(id).role = role;
    }
  }
  return g;
}

std::string position(const char* text, size_t len, const char* where) {
  const size_t offset = where && where >= text && where <= text + len ? static_cast<size_t>(where - text) : 0;
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset; ++i)
    if (text[i] == '\n') ++line, line_start = i + 1;
  return cat("line ", line, ", column ", offset - line_start + 1, " (byte ", offset, ")");
}

}  // namespace

std::string graph_to_json(const Graph& g) {
  JsonPtr root(cJSON_CreateObject());
  check(root != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory writing JSON");
  cJSON* r = root.get();
  put_string(r, "format", kFormatName);
  add(r, "version", json_int(kFormatVersion));
  put_string(r, "name", g.name());

  cJSON* inputs = add(r, "inputs", cJSON_CreateArray());
  for (ValueId id : g.inputs()) {
    const Value& v = g.value(id);
    cJSON* o = add(inputs, nullptr, cJSON_CreateObject());
    put_string(o, "name", v.name);
    put_string(o, "dtype", dtype_name(v.dtype));
    put_ints(o, "shape", v.shape);
  }

  cJSON* constants = add(r, "constants", cJSON_CreateArray());
  for (const Value& v : g.values()) {
    if (v.kind != ValueKind::Constant) continue;
    cJSON* o = add(constants, nullptr, cJSON_CreateObject());
    put_string(o, "name", v.name);
    put_string(o, "dtype", dtype_name(v.dtype));
    put_ints(o, "shape", v.shape);
    put_string(o, "data", base64_encode(v.constant->bytes(), v.constant->nbytes()));
  }

  cJSON* nodes = add(r, "nodes", cJSON_CreateArray());
  for (const Node& n : g.nodes()) {
    cJSON* o = add(nodes, nullptr, cJSON_CreateObject());
    put_string(o, "name", n.name);
    put_string(o, "op", n.op);
    cJSON* ins = add(o, "inputs", cJSON_CreateArray());
    for (const std::string& in : n.input_names) put_string(ins, nullptr, in);
    cJSON* outs = add(o, "outputs", cJSON_CreateArray());
    for (ValueId out : n.outputs) put_string(outs, nullptr, g.value(out).name);
    cJSON* attrs = add(o, "attrs", cJSON_CreateObject());
    for (const auto& [key, value] : n.attrs.all()) put_attr(attrs, key, value);
    put_annotations(o, n.ann);
  }

  cJSON* outputs = add(r, "outputs", cJSON_CreateArray());
  for (const std::string& name : g.output_names()) put_string(outputs, nullptr, name);

  // In the order from_json creates values (inputs, constants, node outputs),
  // so that re-exporting an import gives the same bytes.
  cJSON* roles = add(r, "roles", cJSON_CreateObject());
  auto put_role = [&](ValueId id) {
    const Value& v = g.value(id);
    if (v.role != TensorRole::Unspecified) put_string(roles, v.name.c_str(), role_name(v.role));
  };
  for (ValueId id : g.inputs()) put_role(id);
  for (size_t id = 0; id < g.values().size(); ++id)
    if (g.values()[id].kind == ValueKind::Constant) put_role(static_cast<ValueId>(id));
  for (const Node& n : g.nodes())
    for (ValueId out : n.outputs) put_role(out);

  std::unique_ptr<char, JsonFree> text(cJSON_Print(r));
  check(text != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory printing JSON");
  return std::string(text.get());
}

std::unique_ptr<Graph> graph_from_json(const char* text, size_t len) {
  check(text != nullptr, GENIE_ERR_INVALID_ARGUMENT, "JSON text is NULL");
  check(len > 0, GENIE_ERR_PARSE, "empty input (expected a JSON object)");
  const char* end = nullptr;
  JsonPtr root(cJSON_ParseWithLengthOpts(text, len, &end, false));
  if (!root) fail(GENIE_ERR_PARSE, "invalid JSON at ", position(text, len, end));
  const char* rest = end;
  while (rest < text + len && std::strchr(" \t\r\n", *rest) && *rest) ++rest;
  if (rest != text + len)
    fail(GENIE_ERR_PARSE, "unexpected text after the JSON value at ", position(text, len, rest));
  return read_graph(root.get());
}

}  // namespace genie
