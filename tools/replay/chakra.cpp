#include "chakra.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>

#include "core/error.hpp"

namespace genie::replay {

const char* node_type_name(NodeType t) {
  switch (t) {
    case NodeType::Invalid: return "INVALID_NODE";
    case NodeType::Metadata: return "METADATA_NODE";
    case NodeType::MemLoad: return "MEM_LOAD_NODE";
    case NodeType::MemStore: return "MEM_STORE_NODE";
    case NodeType::Comp: return "COMP_NODE";
    case NodeType::CommSend: return "COMM_SEND_NODE";
    case NodeType::CommRecv: return "COMM_RECV_NODE";
    case NodeType::CommColl: return "COMM_COLL_NODE";
  }
  return "unknown";
}

const char* coll_type_name(CollType t) {
  switch (t) {
    case CollType::AllReduce: return "all_reduce";
    case CollType::Reduce: return "reduce";
    case CollType::AllGather: return "all_gather";
    case CollType::Gather: return "gather";
    case CollType::Scatter: return "scatter";
    case CollType::Broadcast: return "broadcast";
    case CollType::AllToAll: return "all_to_all";
    case CollType::ReduceScatter: return "reduce_scatter";
    case CollType::ReduceScatterBlock: return "reduce_scatter_block";
    case CollType::Barrier: return "barrier";
  }
  return "unknown";
}

int64_t Node::attr_int(const std::string& key, int64_t fallback) const {
  auto it = attrs.find(key);
  return it != attrs.end() && it->second.has_int ? it->second.i : fallback;
}

bool known_schema(const Trace& t) {
  const std::string_view suffix = "chakra.0.0.4";
  const std::string& s = t.schema;
  if (!s.empty()) return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  return t.version == "0.0.4";
}

std::string Node::pg_name() const {
  auto it = attrs.find("pg_name");
  if (it == attrs.end()) return {};
  return it->second.s.empty() && it->second.has_int ? std::to_string(it->second.i) : it->second.s;
}

std::string Node::label() const { return cat("node ", id, " '", name, "'"); }

namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kI64 = 1, kLen = 2, kI32 = 5;

// A bounded reader over one message; every failure names where it happened.
class Wire {
 public:
  Wire(const uint8_t* p, size_t n, const std::string* where, size_t base)
      : p_(p), end_(p + n), where_(where), base_(base), start_(p) {}

  bool done() const { return p_ >= end_; }
  void advance(size_t n) { p_ += n; }
  size_t offset() const { return base_ + static_cast<size_t>(p_ - start_); }

  [[noreturn]] void bad(const std::string& what) const {
    fail(GENIE_ERR_PARSE, *where_, ": byte ", offset(), ": ", what);
  }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) bad("truncated varint (the file ends inside a message)");
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    bad("varint longer than 10 bytes (not a Chakra trace?)");
  }
  uint64_t fixed(int bytes) {
    if (static_cast<size_t>(end_ - p_) < static_cast<size_t>(bytes)) bad("truncated fixed-width field");
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p_[i]) << (8 * i);
    p_ += bytes;
    return v;
  }
  Wire sub() {
    const uint64_t n = varint();
    if (n > static_cast<uint64_t>(end_ - p_)) bad(cat("length ", n, " runs past the end of its message"));
    Wire w(p_, n, where_, offset());
    p_ += n;
    return w;
  }
  std::string bytes() {
    Wire w = sub();
    return std::string(reinterpret_cast<const char*>(w.p_), static_cast<size_t>(w.end_ - w.p_));
  }
  void skip(int wire_type) {
    switch (wire_type) {
      case kVarint: varint(); return;
      case kI64: fixed(8); return;
      case kLen: sub(); return;
      case kI32: fixed(4); return;
      default: bad(cat("wire type ", wire_type, " is not one Chakra uses (not a Chakra trace?)"));
    }
  }
  // Reads a tag: field number and wire type.
  std::pair<uint32_t, int> tag() {
    const uint64_t t = varint();
    const uint32_t field = static_cast<uint32_t>(t >> 3);
    if (field == 0) bad("field number 0 (not a Chakra trace?)");
    return {field, static_cast<int>(t & 7)};
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  const std::string* where_;
  size_t base_;
  const uint8_t* start_;
};

int64_t zigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// One integer of a oneof member or list element, by field number:
// int32/int64/uint32/uint64/bool are varints, sint32/sint64 zigzag varints,
// fixed32/sfixed32 and fixed64/sfixed64 fixed width.
int64_t read_int(Wire& w, uint32_t field, int wt) {
  if (wt == kVarint) {
    const uint64_t v = w.varint();
    if (field == 15 || field == 16 || field == 17 || field == 18) return zigzag(v);
    if (field == 7 || field == 8) return static_cast<int32_t>(v);
    return static_cast<int64_t>(v);
  }
  if (wt == kI32) {
    const uint32_t v = static_cast<uint32_t>(w.fixed(4));
    return (field == 23 || field == 24) ? static_cast<int64_t>(static_cast<int32_t>(v)) : v;
  }
  if (wt == kI64) return static_cast<int64_t>(w.fixed(8));
  w.bad(cat("integer field ", field, " with wire type ", wt));
}

bool is_int_member(uint32_t f) {
  return f == 7 || f == 9 || f == 11 || f == 13 || f == 15 || f == 17 || f == 19 || f == 21 || f == 23 ||
         f == 25 || f == 27;
}
bool is_int_list(uint32_t f) {
  return f == 8 || f == 10 || f == 12 || f == 14 || f == 16 || f == 18 || f == 20 || f == 22 || f == 24 ||
         f == 26 || f == 28;
}

// A list message: `repeated values = 1`, packed or not.
void read_list(Wire w, uint32_t field, std::vector<int64_t>* out) {
  while (!w.done()) {
    auto [f, wt] = w.tag();
    if (f != 1) {
      w.skip(wt);
      continue;
    }
    if (wt == kLen) {
      Wire packed = w.sub();
      const int elem = (field == 20 || field == 24) ? kI32 : (field == 22 || field == 26) ? kI64 : kVarint;
      while (!packed.done()) out->push_back(read_int(packed, field, elem));
    } else {
      out->push_back(read_int(w, field, wt));
    }
  }
}

// AttributeProto: 1 name, 2 doc_string, then the oneof value.
std::pair<std::string, Attr> read_attr(Wire w) {
  std::string name;
  Attr a;
  while (!w.done()) {
    auto [f, wt] = w.tag();
    if (f == 1 && wt == kLen) {
      name = w.bytes();
    } else if (is_int_member(f)) {
      a.i = read_int(w, f, wt);
      a.has_int = true;
    } else if (f == 3 && wt == kI64) {
      const uint64_t bits = w.fixed(8);
      std::memcpy(&a.d, &bits, sizeof a.d);
    } else if (f == 29 && wt == kLen) {
      a.s = w.bytes();
    } else if (is_int_list(f) && wt == kLen) {
      read_list(w.sub(), f, &a.list);
    } else {
      w.skip(wt);
    }
  }
  return {std::move(name), std::move(a)};
}

void read_ids(Wire& w, int wt, std::vector<uint64_t>* out) {
  if (wt == kLen) {
    Wire packed = w.sub();
    while (!packed.done()) out->push_back(packed.varint());
  } else if (wt == kVarint) {
    out->push_back(w.varint());
  } else {
    w.bad("dependency list with a wrong wire type");
  }
}

Node read_node(Wire w) {
  Node n;
  while (!w.done()) {
    auto [f, wt] = w.tag();
    switch (f) {
      case 1: n.id = w.varint(); break;
      case 2: n.name = w.bytes(); break;
      case 3: n.type = static_cast<NodeType>(static_cast<int>(w.varint())); break;
      case 4: read_ids(w, wt, &n.ctrl_deps); break;
      case 5: read_ids(w, wt, &n.data_deps); break;
      case 7: n.duration_micros = w.varint(); break;
      case 10: {
        auto [name, attr] = read_attr(w.sub());
        n.attrs[name] = std::move(attr);
        break;
      }
      default: w.skip(wt);
    }
  }
  return n;
}

}  // namespace

std::string gunzip(const std::string& path, const std::string& bytes) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) fail(GENIE_ERR_INTERNAL, path, ": zlib inflateInit2 failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, &inflateEnd);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  std::string out;
  char buf[1 << 16];
  int rc;
  do {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END)
      fail(GENIE_ERR_PARSE, path, ": corrupt gzip stream: ", zs.msg ? zs.msg : "inflate failed");
    out.append(buf, sizeof buf - zs.avail_out);
    if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0)
      fail(GENIE_ERR_PARSE, path, ": truncated gzip stream");
  } while (rc != Z_STREAM_END);
  return out;
}

Trace parse_trace(const std::string& path, const std::string& raw) {
  const bool gz = raw.size() >= 2 && static_cast<uint8_t>(raw[0]) == 0x1f && static_cast<uint8_t>(raw[1]) == 0x8b;
  const std::string bytes = gz ? gunzip(path, raw) : raw;
  Trace t;
  t.path = path;
  if (bytes.empty()) fail(GENIE_ERR_PARSE, path, ": empty file (not a Chakra trace)");
  Wire stream(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &t.path, 0);
  bool first = true;
  while (!stream.done()) {
    const size_t at = stream.offset();
    const uint64_t len = stream.varint();
    const uint64_t left = bytes.size() - stream.offset();
    if (len > left)
      stream.bad(cat("truncated or not a Chakra trace: the ", first ? "metadata" : "node", " message at byte ", at,
                     " declares ", len, " bytes, ", left, " remain",
                     t.nodes.empty() ? std::string() : cat(" (after ", t.nodes.back().label(), ")")));
    Wire msg(reinterpret_cast<const uint8_t*>(bytes.data()) + stream.offset(), len, &t.path, stream.offset());
    stream.advance(len);
    if (first) {
      // GlobalMetadata {1: string version; 2: repeated AttributeProto attr},
      // every field optional.
      try {
        while (!msg.done()) {
          auto [f, wt] = msg.tag();
          if (f == 1 && wt == kLen) {
            t.version = msg.bytes();
          } else if (f == 2 && wt == kLen) {
            auto [name, attr] = read_attr(msg.sub());
            t.metadata[name] = std::move(attr);
          } else {
            msg.skip(wt);
          }
        }
      } catch (const Error& e) {
        fail(e.code(), e.detail(), " (not a Chakra trace: the first message is not a GlobalMetadata)");
      }
      if (auto it = t.metadata.find("schema"); it != t.metadata.end()) t.schema = it->second.s;
      first = false;
      continue;
    }
    try {
      t.nodes.push_back(read_node(msg));
    } catch (const Error& e) {
      fail(e.code(), e.detail(), " (in the node message that starts at byte ", at, ", after ",
           t.nodes.empty() ? std::string("the metadata") : t.nodes.back().label(), ")");
    }
  }
  if (t.version.empty() && t.schema.empty())
    t.warnings.push_back("its metadata has neither a version nor a schema: read as Chakra 0.0.4 (et_def.proto)");
  else if (!known_schema(t))
    t.warnings.push_back(cat("schema '", t.version.empty() ? t.schema : t.version,
                             "' is not the one this reader follows (Chakra 0.0.4): read by et_def.proto's field numbers"));
  return t;
}

std::string read_whole_file(const std::string& path, const std::string& what) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail(GENIE_ERR_IO, what, " ", path, ": ", std::strerror(errno));
  std::string data;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) data.append(buf, n);
  if (std::ferror(f.get())) fail(GENIE_ERR_IO, what, " ", path, ": ", std::strerror(errno));
  return data;
}

Trace read_trace(const std::string& path) { return parse_trace(path, read_whole_file(path, "workload file")); }

}  // namespace genie::replay
