// Writes the seed corpora of the harnesses (fuzz/corpus/<harness>/), made
// from valid messages, frames, handshakes and graphs, so that each fuzzer
// starts from inputs that go deep. Run by hand after a protocol change:
//   build-fuzz/make_seeds fuzz/corpus
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "control/wire.hpp"
#include "control/wire_codec.hpp"
#include "genie.pb.h"
#include "server_script.hpp"

namespace {

using genie::wire::MsgType;
namespace w = genie::wire;

std::string g_root;

void put(const std::string& harness, const std::string& name, const std::string& bytes) {
  const std::string dir = g_root + "/" + harness;
  ::mkdir(g_root.c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}

std::string frame(MsgType t, const google::protobuf::Message& m, uint64_t rid = 1, const std::string& payload = "") {
  const std::string msg = w::encode_msg(m);
  w::FrameHeader h;
  h.type = t;
  h.request_id = rid;
  h.payload_len = payload.size();
  uint8_t hdr[w::kHeaderSize];
  w::encode_header(h, msg.data(), msg.size(), hdr);
  return std::string(reinterpret_cast<char*>(hdr), sizeof hdr) + msg + payload;
}

// server_fuzz records (server_script.hpp).
std::string u16(size_t v) { return std::string{static_cast<char>(v & 0xff), static_cast<char>((v >> 8) & 0xff)}; }

std::string rec(MsgType t, const google::protobuf::Message& m, const std::string& payload = "") {
  size_t i = 0;
  while (genie::fuzz::kScriptTypes[i] != t) ++i;
  const std::string msg = w::encode_msg(m);
  std::string r;
  r += static_cast<char>(payload.empty() ? genie::fuzz::kOpFrame : genie::fuzz::kOpFrame | genie::fuzz::kWithPayload);
  r += static_cast<char>(i);
  r += u16(msg.size()) + msg;
  if (!payload.empty()) r += u16(payload.size()) + payload;
  return r;
}
const std::string kAuth(1, genie::fuzz::kOpAuth), kRead(1, genie::fuzz::kOpRead);

w::Hello hello(const std::string& node) {
  w::Hello h;
  h.set_protocol_version(w::kProtocolVersion);
  h.set_abi_version(GENIE_ABI_VERSION);
  h.set_node_id(node);
  h.set_role(GENIE_NODE_ROLE_CLIENT);
  return h;
}

const char kGraph[] =
    R"({"format":"genie.graph","version":1,"name":"mlp","inputs":[{"name":"x","dtype":"f32","shape":[2,3]},)"
    R"({"name":"w","dtype":"f32","shape":[4,3]}],"nodes":[{"name":"fc","op":"linear","inputs":["x","w"],)"
    R"("outputs":["h"],"annotations":{"layer":0,"phase":"prefill"}},{"name":"act","op":"relu","inputs":["h"],)"
    R"("outputs":["y"]}],"outputs":["y"]})";

const char kGraphConst[] =
    R"({"format":"genie.graph","version":1,"name":"scale","inputs":[{"name":"x","dtype":"f32","shape":[-1,4]}],)"
    R"("constants":[{"name":"s","dtype":"f32","shape":[1],"data":"AACAPw=="}],"nodes":[{"name":"m","op":"mul",)"
    R"("inputs":["x","s"],"outputs":["y"]},{"name":"sm","op":"softmax","inputs":["y"],"outputs":["z"],)"
    R"("attrs":{"axis":{"int":-1}}}],"outputs":["z"]})";

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds CORPUS_DIR\n");
    return 2;
  }
  g_root = argv[1];

  // graph_json: valid graphs, and the out-of-range numbers that must stay errors.
  put("graph_json", "mlp.json", kGraph);
  put("graph_json", "constant_attrs.json", kGraphConst);
  put("graph_json", "dim_1e300.json",
      R"({"format":"genie.graph","version":1,"name":"t","inputs":[{"name":"x","dtype":"f32","shape":[1e300,4]}],)"
      R"("nodes":[{"name":"r","op":"relu","inputs":["x"],"outputs":["y"]}],"outputs":["y"]})");
  put("graph_json", "dim_negative_fraction.json",
      R"({"format":"genie.graph","version":1,"name":"t","inputs":[{"name":"x","dtype":"f32","shape":[-3,2.5]}],)"
      R"("nodes":[{"name":"r","op":"relu","inputs":["x"],"outputs":["y"]}],"outputs":["y"]})");

  // frame: one valid frame of each kind a peer sends.
  w::TensorAlloc ta;
  ta.set_dtype(GENIE_DTYPE_F32);
  ta.add_shape(2);
  ta.add_shape(3);
  ta.set_device("cpu:0");
  w::TensorWrite tw;
  tw.set_tensor_id(1);
  w::TensorRead tr;
  tr.set_tensor_id(1);
  tr.set_nbytes(24);
  w::GraphSubmit gs;
  gs.set_graph_json(kGraph);
  w::Binding* b = gs.add_bindings();
  b->set_name("x");
  b->set_tensor_id(1);
  b = gs.add_bindings();
  b->set_name("w");
  b->set_tensor_id(2);
  w::ErrorReply er;
  er.set_status(GENIE_ERR_NOT_FOUND);
  er.set_detail("no tensor 9 in this session");
  w::Welcome wel;
  wel.set_session_token(std::string(32, 'k'));
  wel.set_server_node_id("s");
  wel.add_devices("cpu:0");
  put("frame", "hello", frame(MsgType::Hello, hello("client-1")));
  put("frame", "tensor_alloc", frame(MsgType::TensorAlloc, ta, 2));
  put("frame", "tensor_write", frame(MsgType::TensorWrite, tw, 3, std::string(24, '\1')));
  put("frame", "tensor_read", frame(MsgType::TensorRead, tr, 4));
  put("frame", "graph_submit", frame(MsgType::GraphSubmit, gs, 5));
  put("frame", "error_reply", frame(MsgType::ErrorReply, er, 6));
  put("frame", "welcome", frame(MsgType::Welcome, wel, 7));
  put("frame", "goodbye", frame(MsgType::Goodbye, w::Goodbye(), 8));

  // server: handshakes and sessions.
  const std::string open = rec(MsgType::Hello, hello("fuzz-client")) + kAuth + kRead;
  put("server", "handshake", open);
  put("server", "hello_only", rec(MsgType::Hello, hello("c2")) + kRead);
  put("server", "probe", rec(MsgType::Probe, w::Probe()) + kRead);
  put("server", "data_hello", rec(MsgType::DataHello, w::DataHello()) + kRead);
  put("server", "server_info", open + rec(MsgType::ServerInfoRequest, w::ServerInfoRequest()) + kRead);
  w::TensorAlloc ta2 = ta;
  ta2.set_shape(0, 4);
  put("server", "tensors",
      open + rec(MsgType::TensorAlloc, ta) + kRead + rec(MsgType::TensorAlloc, ta2) + kRead +
          rec(MsgType::TensorWrite, tw, std::string(24, '\1')) + kRead + rec(MsgType::TensorRead, tr) + kRead);
  put("server", "graph",
      open + rec(MsgType::TensorAlloc, ta) + kRead + rec(MsgType::TensorAlloc, ta2) + kRead +
          rec(MsgType::GraphSubmit, gs) + kRead + kRead + rec(MsgType::Goodbye, w::Goodbye()) + kRead);
  w::TensorAlloc huge = ta;
  huge.set_shape(0, 1 << 20);
  huge.set_shape(1, 1 << 10);
  put("server", "over_quota", open + rec(MsgType::TensorAlloc, huge) + kRead);
  put("server", "raw_header", std::string("\x01\x28\x00", 3) + "GNIE" + std::string(36, '\0'));
  return 0;
}
