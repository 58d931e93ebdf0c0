#include "graph_io.hpp"

#include <cstdint>
#include <memory>

#include "cli.hpp"

namespace genie_cli {
namespace {

// Just enough of a JSON tree (RFC 8259) to walk to two arrays. The library
// links its JSON parser privately, so the tool cannot reuse it.
struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  std::string text;               // String value
  std::vector<Json> items;        // Array items / Object values
  std::vector<std::string> keys;  // Object keys

  const Json* get(std::string_view key) const {
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return &items[i];
    return nullptr;
  }
};

class Parser {
 public:
  Parser(std::string_view s, const std::string& source) : s_(s), source_(source) {}

  Json parse_document() {
    Json v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("text after the JSON value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 512;

  [[noreturn]] void fail(const std::string& what) const {
    failure(source_ + ": cannot read the graph's inputs and outputs: " + what + " at byte " +
            std::to_string(pos_));
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool take(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Json parse_value(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    skip_ws();
    Json v;
    const char c = peek();
    if (c == '{') {
      v.kind = Json::Kind::Object;
      ++pos_;
      skip_ws();
      if (peek() == '}') {
        ++pos_;
        return v;
      }
      while (true) {
        skip_ws();
        if (peek() != '"') fail("expected a key");
        v.keys.push_back(parse_string());
        skip_ws();
        if (peek() != ':') fail("expected ':'");
        ++pos_;
        v.items.push_back(parse_value(depth + 1));
        skip_ws();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        if (peek() != '}') fail("expected ',' or '}'");
        ++pos_;
        return v;
      }
    }
    if (c == '[') {
      v.kind = Json::Kind::Array;
      ++pos_;
      skip_ws();
      if (peek() == ']') {
        ++pos_;
        return v;
      }
      while (true) {
        v.items.push_back(parse_value(depth + 1));
        skip_ws();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        if (peek() != ']') fail("expected ',' or ']'");
        ++pos_;
        return v;
      }
    }
    if (c == '"') {
      v.kind = Json::Kind::String;
      v.text = parse_string();
      return v;
    }
    if (take("true") || take("false")) {
      v.kind = Json::Kind::Bool;
      return v;
    }
    if (take("null")) return v;
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Json::Kind::Number;
      const size_t start = pos_;
      while (pos_ < s_.size() && std::string_view("+-0123456789.eE").find(s_[pos_]) != std::string_view::npos)
        ++pos_;
      v.text = std::string(s_.substr(start, pos_ - start));
      return v;
    }
    fail("unexpected character");
  }

  uint32_t parse_hex4() {
    if (s_.size() - pos_ < 4) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<uint32_t>(h - 'A' + 10);
      else
        fail("bad \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xd800 && cp < 0xdc00) {  // high surrogate: a low one must follow
            if (!take("\\u")) fail("lone surrogate in \\u escape");
            const uint32_t lo = parse_hex4();
            if (lo < 0xdc00 || lo >= 0xe000) fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }

  std::string_view s_;
  const std::string& source_;
  size_t pos_ = 0;
};

// The name of an entry of "inputs" or "outputs": a string, or an object
// with a string "name".
const std::string* entry_name(const Json& e) {
  if (e.kind == Json::Kind::String) return &e.text;
  if (e.kind != Json::Kind::Object) return nullptr;
  const Json* n = e.get("name");
  return n && n->kind == Json::Kind::String ? &n->text : nullptr;
}

std::vector<std::string> names_of(const Json& root, const char* key, const std::string& source) {
  std::vector<std::string> names;
  const Json* arr = root.get(key);
  if (!arr) return names;  // a graph may have no inputs
  if (arr->kind != Json::Kind::Array) failure(source + ": \"" + key + "\" is not an array");
  for (const Json& e : arr->items) {
    const std::string* n = entry_name(e);
    if (!n) failure(source + ": an entry of \"" + key + "\" has no name");
    names.push_back(*n);
  }
  return names;
}

}  // namespace

GraphIo graph_io_names(std::string_view json, const std::string& source) {
  const Json root = Parser(json, source).parse_document();
  if (root.kind != Json::Kind::Object) failure(source + ": the graph is not a JSON object");
  GraphIo io;
  io.inputs = names_of(root, "inputs", source);
  io.outputs = names_of(root, "outputs", source);
  return io;
}

}  // namespace genie_cli
