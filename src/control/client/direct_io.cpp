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

wire::FrameHeader Exchange::reply(uint64_t rid, std::string* msg) {
  const wire::FrameHeader h = read(msg, true);
  if (h.request_id != rid)
    broke(Broke::Protocol, cat("reply to request ", h.request_id, " while request ", rid, " waited"));
  return h;
}

void SocketExchange::send(MsgType type, uint64_t rid, const std::string& msg, const void* payload,
                          uint64_t len) {
  send_frame(io_, type, rid, msg, payload, len);
}
wire::FrameHeader SocketExchange::read(std::string* msg, bool spin) {
  return read_frame(io_, max_, msg, spin);
}
void SocketExchange::payload(void* dst, size_t n) { recv_all(io_, dst, n, false); }
void SocketExchange::skip(uint64_t n) {
  std::vector<char> sink(static_cast<size_t>(std::min<uint64_t>(n, 1 << 16)));
  for (uint64_t left = n; left > 0;) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(left, sink.size()));
    recv_all(io_, sink.data(), k, false);
    left -= k;
  }
}

void ChannelExchange::send(MsgType type, uint64_t rid, const std::string& msg, const void* payload,
                           uint64_t len) {
  dataplane::FrameHeader h;
  h.type = static_cast<uint16_t>(type);
  h.request_id = rid;
  ch_.send_frame(h, msg.data(), msg.size(), payload, len, deadline_);
}
wire::FrameHeader ChannelExchange::read(std::string* msg, bool) {
  return wire::from_frame(ch_.recv_frame(max_, wire::frame_types(), msg, deadline_));
}
void ChannelExchange::payload(void* dst, size_t n) { ch_.recv_payload(dst, n, deadline_); }
void ChannelExchange::skip(uint64_t n) {
  if (n == 0) return;
  // A payload arrives whole: bounded as a message is.
  if (n > max_) broke(Broke::Protocol, cat("an unexpected ", n, "-byte payload"));
  std::vector<char> sink(static_cast<size_t>(n));
  ch_.recv_payload(sink.data(), n, deadline_);
}

}  // namespace genie::direct_io
