// The direct link's frames (direct_io.hpp).
#include "control/client/direct_io.hpp"

#include "control/client/impl.hpp"
#include "control/wire_codec.hpp"

namespace genie::direct_io {

void append_frame(std::string* out, MsgType type, uint64_t rid, const std::string& msg,
                  const std::vector<uint64_t>& frees) {
  const size_t at = out->size();
  const size_t start = at + wire::kHeaderSize;
  out->resize(start);  // the header, once the message is in place
  out->append(msg);
  wire::append_submit_frees(out, frees);
  wire::FrameHeader h;
  h.type = type;
  h.request_id = rid;
  wire::encode_header(h, out->data() + start, out->size() - start, reinterpret_cast<uint8_t*>(out->data() + at));
}

void send_frame(Io& io, MsgType type, uint64_t rid, const std::string& msg, const void* payload, uint64_t len) {
  dataplane::FrameHeader h;
  h.type = static_cast<uint16_t>(type);
  h.request_id = rid;
  dataplane::tcp::send_frame(io, h, msg.data(), msg.size(), payload, len);
}

wire::FrameHeader read_frame(Io& io, uint32_t max_message, std::string* msg, bool spin) {
  return wire::from_frame(dataplane::tcp::read_frame(io, max_message, wire::frame_types(), msg, spin));
}

wire::FrameHeader recv_reply(Io& io, uint64_t rid, uint32_t max_message, std::string* msg) {
  const wire::FrameHeader h = read_frame(io, max_message, msg, true);
  if (h.request_id != rid)
    broke(Broke::Protocol, cat("reply to request ", h.request_id, " while request ", rid, " waited"));
  return h;
}

int connect_to(const std::string& address, Clock::time_point deadline) {
  return dataplane::tcp::connect_blocking(address, kDataSocketBuffer, deadline);
}

}  // namespace genie::direct_io
