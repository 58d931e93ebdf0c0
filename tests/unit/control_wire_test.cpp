// Frame header encoding, every refusal of decode_header/verify_crc, and the
// protobuf codec helpers.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "control/wire.hpp"
#include "control/wire_codec.hpp"
#include "core/error.hpp"
#include "genie.pb.h"

namespace genie::wire {
namespace {

struct Encoded {
  uint8_t header[kHeaderSize];
  std::string msg;
};

Encoded encode(FrameHeader h, std::string msg) {
  Encoded e;
  e.msg = std::move(msg);
  encode_header(h, e.msg.data(), e.msg.size(), e.header);
  return e;
}

FrameHeader sample_header() {
  FrameHeader h;
  h.type = MsgType::TensorWrite;
  h.flags = kFlagError;
  h.request_id = 0x0102030405060708ull;
  h.payload_len = 0x1122334455667788ull;
  return h;
}

// Runs fn, which must throw genie::Error; returns it.
template <class Fn>
Error expect_error(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no genie::Error thrown";
  return Error(GENIE_OK, "");
}

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

TEST(ControlWire, HeaderRoundTrip) {
  const FrameHeader h = sample_header();
  const Encoded e = encode(h, "hello message");
  const FrameHeader d = decode_header(e.header, kDefaultMaxMessage);
  EXPECT_EQ(d.version, kWireVersion);
  EXPECT_EQ(d.type, MsgType::TensorWrite);
  EXPECT_EQ(d.flags, kFlagError);
  EXPECT_EQ(d.msg_len, e.msg.size());
  EXPECT_EQ(d.request_id, h.request_id);
  EXPECT_EQ(d.payload_len, h.payload_len);
  EXPECT_NO_THROW(verify_crc(e.header, e.msg.data(), e.msg.size()));
}

TEST(ControlWire, EmptyMessageRoundTrip) {
  FrameHeader h;
  h.type = MsgType::Goodbye;
  const Encoded e = encode(h, "");
  const FrameHeader d = decode_header(e.header, kDefaultMaxMessage);
  EXPECT_EQ(d.type, MsgType::Goodbye);
  EXPECT_EQ(d.msg_len, 0u);
  EXPECT_EQ(d.payload_len, 0u);
  EXPECT_NO_THROW(verify_crc(e.header, nullptr, 0));
}

TEST(ControlWire, LayoutIsLittleEndianAsDocumented) {
  const Encoded e = encode(sample_header(), "abc");
  EXPECT_EQ(0, std::memcmp(e.header, "GNIE", 4));
  EXPECT_EQ(e.header[4], kWireVersion & 0xff);
  EXPECT_EQ(e.header[5], kWireVersion >> 8);
  EXPECT_EQ(e.header[6], 12);  // TensorWrite
  EXPECT_EQ(e.header[7], 0);
  EXPECT_EQ(e.header[8], 1);      // kFlagError
  EXPECT_EQ(e.header[12], 3);     // msg_len
  EXPECT_EQ(e.header[16], 0x08);  // request_id, low byte first
  EXPECT_EQ(e.header[23], 0x01);
  EXPECT_EQ(e.header[24], 0x88);  // payload_len
  EXPECT_EQ(e.header[31], 0x11);
  for (int i = 36; i < 40; ++i) EXPECT_EQ(e.header[i], 0) << i;
  // The CRC is zlib's CRC-32 of the header with a zero CRC field, then the
  // message.
  uint8_t zeroed[kHeaderSize];
  std::memcpy(zeroed, e.header, kHeaderSize);
  std::memset(zeroed + 32, 0, 4);
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, zeroed, kHeaderSize);
  crc = crc32(crc, reinterpret_cast<const Bytef*>("abc"), 3);
  const uint32_t stored =
      e.header[32] | (e.header[33] << 8) | (e.header[34] << 16) | (static_cast<uint32_t>(e.header[35]) << 24);
  EXPECT_EQ(stored, static_cast<uint32_t>(crc));
  EXPECT_EQ(decode_header(e.header, kDefaultMaxMessage).crc, stored);
}

TEST(ControlWire, CrcIsZlibsAtEveryMessageLength) {
  // The frame CRC covers the header and the whole message, at every
  // length: short messages, and runs long enough for any way of folding
  // them.
  std::string msg;
  for (size_t len = 0; len <= 1100; len += (len < 300 ? 1 : 97)) {
    msg.resize(len);
    for (size_t i = 0; i < len; ++i) msg[i] = static_cast<char>((i * 131 + len * 7) & 0xff);
    const Encoded e = encode(sample_header(), msg);
    uint8_t zeroed[kHeaderSize];
    std::memcpy(zeroed, e.header, kHeaderSize);
    std::memset(zeroed + 32, 0, 4);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, zeroed, kHeaderSize);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(msg.data()), static_cast<uInt>(len));
    ASSERT_EQ(decode_header(e.header, kDefaultMaxMessage).crc, static_cast<uint32_t>(crc)) << len;
    EXPECT_NO_THROW(verify_crc(e.header, msg.data(), msg.size())) << len;
  }
}

TEST(ControlWire, RejectsBadMagic) {
  Encoded e = encode(sample_header(), "x");
  e.header[0] = 'H';  // "HNIE": e.g. someone speaking HTTP
  const Error err = expect_error([&] { decode_header(e.header, kDefaultMaxMessage); });
  EXPECT_EQ(err.code(), GENIE_ERR_PROTOCOL);
  EXPECT_NE(err.detail().find("magic"), std::string::npos) << err.detail();
}

TEST(ControlWire, RejectsOtherVersionNamingBoth) {
  FrameHeader h = sample_header();
  h.version = 7;
  const Encoded e = encode(h, "x");
  const Error err = expect_error([&] { decode_header(e.header, kDefaultMaxMessage); });
  EXPECT_EQ(err.code(), GENIE_ERR_VERSION_MISMATCH);
  EXPECT_NE(err.detail().find("version 7"), std::string::npos) << err.detail();
  EXPECT_NE(err.detail().find("version " + std::to_string(kWireVersion)), std::string::npos) << err.detail();
}

TEST(ControlWire, VersionIsCheckedBeforeTheRestOfTheHeader) {
  // A future version may use the reserved field or new types.
  FrameHeader h = sample_header();
  h.version = 2;
  h.type = static_cast<MsgType>(999);
  Encoded e = encode(h, "");
  put32(e.header + 36, 5);
  EXPECT_EQ(expect_error([&] { decode_header(e.header, 0); }).code(), GENIE_ERR_VERSION_MISMATCH);
}

TEST(ControlWire, RejectsUnknownTypes) {
  for (uint16_t t : {0, 8, 9, 19, 24, 37, 39, 41, 1000, 65535}) {
    FrameHeader h;
    h.type = static_cast<MsgType>(t);
    const Encoded e = encode(h, "");
    const Error err = expect_error([&] { decode_header(e.header, kDefaultMaxMessage); });
    EXPECT_EQ(err.code(), GENIE_ERR_PROTOCOL) << t;
    EXPECT_NE(err.detail().find("unknown message type " + std::to_string(t)), std::string::npos)
        << err.detail();
  }
}

TEST(ControlWire, RejectsNonzeroReserved) {
  for (int byte = 36; byte < 40; ++byte) {
    Encoded e = encode(sample_header(), "x");
    e.header[byte] = 0x80;
    const Error err = expect_error([&] { decode_header(e.header, kDefaultMaxMessage); });
    EXPECT_EQ(err.code(), GENIE_ERR_PROTOCOL) << byte;
    EXPECT_NE(err.detail().find("reserved"), std::string::npos) << err.detail();
  }
}

TEST(ControlWire, RejectsMessageOverTheMaximum) {
  const Encoded e = encode(sample_header(), std::string(1000, 'm'));
  EXPECT_NO_THROW(decode_header(e.header, 1000));  // exactly the maximum is fine
  const Error err = expect_error([&] { decode_header(e.header, 999); });
  EXPECT_EQ(err.code(), GENIE_ERR_PROTOCOL);
  EXPECT_NE(err.detail().find("1000 bytes exceeds the maximum message size of 999"), std::string::npos)
      << err.detail();

  // A forged 2 GiB length against the default limit.
  Encoded big = encode(sample_header(), "");
  put32(big.header + 12, 1u << 31);
  EXPECT_EQ(expect_error([&] { decode_header(big.header, kDefaultMaxMessage); }).code(), GENIE_ERR_PROTOCOL);
}

TEST(ControlWire, CrcCoversEveryHeaderByte) {
  const Encoded good = encode(sample_header(), "message bytes");
  for (size_t i = 0; i < kHeaderSize; ++i) {
    if (i >= 32 && i < 36) continue;  // the CRC itself: covered below
    Encoded e = good;
    e.header[i] ^= 0x04;
    const Error err = expect_error([&] { verify_crc(e.header, e.msg.data(), e.msg.size()); });
    EXPECT_EQ(err.code(), GENIE_ERR_PROTOCOL) << "byte " << i;
    EXPECT_NE(err.detail().find("CRC mismatch"), std::string::npos) << err.detail();
  }
  Encoded e = good;
  e.header[33] ^= 0x01;
  EXPECT_EQ(expect_error([&] { verify_crc(e.header, e.msg.data(), e.msg.size()); }).code(),
            GENIE_ERR_PROTOCOL);
}

TEST(ControlWire, CrcCoversTheMessage) {
  const Encoded good = encode(sample_header(), "message bytes");
  for (size_t i = 0; i < good.msg.size(); ++i) {
    Encoded e = good;
    e.msg[i] ^= 0x20;
    const Error err = expect_error([&] { verify_crc(e.header, e.msg.data(), e.msg.size()); });
    EXPECT_EQ(err.code(), GENIE_ERR_PROTOCOL) << "byte " << i;
    EXPECT_NE(err.detail().find("TensorWrite"), std::string::npos) << err.detail();
  }
  // A truncated message does not match either.
  EXPECT_THROW(verify_crc(good.header, good.msg.data(), good.msg.size() - 1), Error);
}

TEST(ControlWire, KnownTypesAndNames) {
  const MsgType all[] = {MsgType::Hello,
                         MsgType::Challenge,
                         MsgType::AuthResponse,
                         MsgType::Welcome,
                         MsgType::DataHello,
                         MsgType::ErrorReply,
                         MsgType::Ok,
                         MsgType::TensorAlloc,
                         MsgType::TensorAllocReply,
                         MsgType::TensorWrite,
                         MsgType::TensorRead,
                         MsgType::TensorFree,
                         MsgType::GraphSubmit,
                         MsgType::SubmitAccepted,
                         MsgType::GraphDone,
                         MsgType::GraphSubmitDelta,
                         MsgType::ServerInfoRequest,
                         MsgType::ServerInfo,
                         MsgType::WorkerRegister,
                         MsgType::PlanExplain,
                         MsgType::PlanExplainReply,
                         MsgType::ClockProbe,
                         MsgType::ClockProbeReply,
                         MsgType::Goodbye,
                         MsgType::Probe,
                         MsgType::ProbeReply,
                         MsgType::Heartbeat,
                         MsgType::HeartbeatReply,
                         MsgType::TensorExport,
                         MsgType::TensorExportReply,
                         MsgType::TensorFetch,
                         MsgType::TensorImport,
                         MsgType::TensorRmaWrite,
                         MsgType::TensorRmaRead};
  int known = 0;
  for (uint32_t t = 0; t <= 0xffff; ++t) known += known_type(static_cast<uint16_t>(t)) ? 1 : 0;
  EXPECT_EQ(known, static_cast<int>(std::size(all)));
  for (MsgType t : all) {
    EXPECT_TRUE(known_type(static_cast<uint16_t>(t)));
    EXPECT_STRNE(type_name(t), "unknown");
  }
  EXPECT_STREQ(type_name(MsgType::GraphSubmit), "GraphSubmit");
  EXPECT_STREQ(type_name(static_cast<MsgType>(4242)), "unknown");
}

TEST(ControlWire, CodecRoundTrip) {
  Hello h;
  h.set_protocol_version(kProtocolVersion);
  h.set_node_id("node-a");
  h.add_capabilities("cpu");
  const std::string bytes = encode_msg(h);
  const Hello back = parse_msg<Hello>(bytes, MsgType::Hello);
  EXPECT_EQ(back.protocol_version(), kProtocolVersion);
  EXPECT_EQ(back.node_id(), "node-a");
  ASSERT_EQ(back.capabilities_size(), 1);
  EXPECT_EQ(back.capabilities(0), "cpu");
}

TEST(ControlWire, CodecRefusesMalformedBytesNamingTheType) {
  const std::string garbage("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);  // a varint that never ends
  const Error err = expect_error([&] { parse_msg<TensorWrite>(garbage, MsgType::TensorWrite); });
  EXPECT_EQ(err.code(), GENIE_ERR_PROTOCOL);
  EXPECT_NE(err.detail().find("TensorWrite"), std::string::npos) << err.detail();
  EXPECT_NE(err.detail().find("genie.wire.TensorWrite"), std::string::npos) << err.detail();
}

TEST(ControlWire, FreesAppendedToASubmissionMergeIntoIt) {
  const std::vector<uint64_t> ids = {1, 127, 128, 300, uint64_t{1} << 40, ~uint64_t{0}};
  // The bytes protobuf itself writes for the field alone.
  SubmitFrees f;
  for (uint64_t id : ids) f.add_free_tensor_ids(id);
  std::string mine;
  append_submit_frees(&mine, ids);
  EXPECT_EQ(mine, f.SerializeAsString());
  // After either submission's encoding, they parse as its field.
  GraphSubmitDelta d;
  d.set_base_hash(std::string(32, 'b'));
  d.add_bindings()->set_name("x");
  std::string bytes = encode_msg(d);
  append_submit_frees(&bytes, ids);
  const auto back = parse_msg<GraphSubmitDelta>(bytes, MsgType::GraphSubmitDelta);
  EXPECT_EQ(back.base_hash(), d.base_hash());
  EXPECT_EQ(back.bindings_size(), 1);
  EXPECT_EQ(std::vector<uint64_t>(back.free_tensor_ids().begin(), back.free_tensor_ids().end()), ids);
  GraphSubmit g;
  g.set_graph_json("{}");
  bytes = encode_msg(g);
  append_submit_frees(&bytes, {7});
  const auto full = parse_msg<GraphSubmit>(bytes, MsgType::GraphSubmit);
  EXPECT_EQ(full.graph_json(), "{}");
  ASSERT_EQ(full.free_tensor_ids_size(), 1);
  EXPECT_EQ(full.free_tensor_ids(0), 7u);
  // None: nothing appended.
  std::string none;
  append_submit_frees(&none, {});
  EXPECT_TRUE(none.empty());
}

TEST(ControlWire, ReusedMessageIsTheThreadsOwnClearedEachTime) {
  const GraphDone* first;
  {
    ReusedMsg<GraphDone> d(100);
    d->set_detail("left over");
    d->add_outputs()->set_name("y");
    first = &*d;
  }
  ReusedMsg<GraphDone> again(100);
  EXPECT_EQ(&*again, first);  // the same message: its buffers are kept
  EXPECT_TRUE(again->detail().empty());
  EXPECT_EQ(again->outputs_size(), 0);
  // A use inside another gets a message of its own.
  ReusedMsg<GraphDone> nested(100);
  EXPECT_NE(&*nested, first);
  nested->set_detail("nested");
  EXPECT_TRUE(again->detail().empty());
}

TEST(ControlWire, ALargeReusedMessageIsNotKept) {
  const GraphDone* kept;
  {
    ReusedMsg<GraphDone> d(10);
    kept = &*d;
  }
  ReusedMsg<GraphDone> large(ReusedMsg<GraphDone>::kKeepBytes + 1);
  EXPECT_NE(&*large, kept);
  // Another thread has a message of its own.
  const GraphDone* there = nullptr;
  std::thread([&] {
    ReusedMsg<GraphDone> d(10);
    there = &*d;
  }).join();
  EXPECT_NE(there, kept);
}

}  // namespace
}  // namespace genie::wire
