// Chakra execution traces (.et): the reader.
//
// A file is a stream of messages, each a varint32 byte length followed by a
// protobuf message: GlobalMetadata first, then Nodes (schema et_def.proto of
// mlcommons/chakra; the field numbers are written out in chakra.cpp). A file
// may be gzip-wrapped. The decoder is a small protobuf wire reader of our
// own: the schema is a dozen fields, and reading them by number keeps every
// integer member of the attribute oneof acceptable without generated code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace genie::replay {

enum class NodeType : int {
  Invalid = 0,
  Metadata = 1,
  MemLoad = 2,
  MemStore = 3,
  Comp = 4,
  CommSend = 5,
  CommRecv = 6,
  CommColl = 7,
};

enum class CollType : int {
  AllReduce = 0,
  Reduce = 1,
  AllGather = 2,
  Gather = 3,
  Scatter = 4,
  Broadcast = 5,
  AllToAll = 6,
  ReduceScatter = 7,
  ReduceScatterBlock = 8,
  Barrier = 9,
};

const char* node_type_name(NodeType t);
const char* coll_type_name(CollType t);

// One attribute value: integers (any width, signedness or bool), doubles,
// strings and integer/bool lists are kept; other members are skipped.
struct Attr {
  bool has_int = false;
  int64_t i = 0;
  double d = 0;
  std::string s;
  std::vector<int64_t> list;  // bool_list, int*_list members
};

struct Node {
  uint64_t id = 0;
  std::string name;
  NodeType type = NodeType::Invalid;
  std::vector<uint64_t> ctrl_deps;
  std::vector<uint64_t> data_deps;
  uint64_t duration_micros = 0;
  std::map<std::string, Attr> attrs;

  // The integer attribute `key`, or `fallback` when absent.
  int64_t attr_int(const std::string& key, int64_t fallback) const;
  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
  // The communicator group it names (pg_name: a string, or an integer as
  // its decimal digits); "" when none.
  std::string pg_name() const;
  // "node 12 'all_reduce'" for error messages.
  std::string label() const;
};

struct Trace {
  std::string path;
  // GlobalMetadata: every field is optional. Chakra's own converters write
  // a `schema` attribute and no version.
  std::string version;                  // GlobalMetadata.version, or ""
  std::string schema;                   // its attribute `schema`, or ""
  std::map<std::string, Attr> metadata; // its attributes
  std::vector<Node> nodes;  // file order
  // What the reader (or a repair of the trace) noticed and worked around,
  // for the user: one line each, without the file's name.
  std::vector<std::string> warnings;
};

// The schema this reader follows: et_def.proto of Chakra 0.0.4, as a
// `version` ("0.0.4") or as the suffix of a converter's `schema`
// attribute ("1.0.2-chakra.0.0.4").
bool known_schema(const Trace& t);

// Decodes `bytes` (the content of `path`, possibly gzip-wrapped). Throws
// genie::Error(GENIE_ERR_PARSE) naming the file, the byte offset
// and, past the metadata, the node, for truncated or malformed input.
// Metadata without a version or with an unknown schema is read by the
// schema's field numbers, with a warning (Trace::warnings).
Trace parse_trace(const std::string& path, const std::string& bytes);

// The whole content of a file; Error(IO) naming `what`, the file and the
// system's reason when it cannot be read.
std::string read_whole_file(const std::string& path, const std::string& what);

// Reads and decodes a file (Error(IO) naming it when it cannot be read).
Trace read_trace(const std::string& path);

// The inflated content of a gzip stream (Error(INVALID_ARGUMENT) naming
// `path` on a corrupt or truncated stream).
std::string gunzip(const std::string& path, const std::string& bytes);

}  // namespace genie::replay
