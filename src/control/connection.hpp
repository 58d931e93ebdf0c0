// The control plane's connection: a channel of a transport
// (dataplane/transport.hpp) speaking control's message types. Frames of a
// type wire::known_type does not know close it from their header; handlers
// see headers whose type is a wire::MsgType.
//
// Control connections go through the TCP transport; a session's data
// connection through the transport its client selected among those the
// server offers (docs/protocol.md). Everything else (threads, lifetime, the
// order of callbacks once closing) is the Channel's.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "control/wire.hpp"
#include "dataplane/transport.hpp"

namespace genie {

using dataplane::PayloadSink;

class Connection {
 public:
  struct Handlers {
    // As dataplane::ChannelHandlers::on_frame, with control's header.
    std::function<PayloadSink(const wire::FrameHeader&, std::string&& msg)> on_frame;
    // As dataplane::ChannelHandlers::on_close.
    std::function<void(genie_status_t status, const std::string& detail)> on_close;
  };

  // Connects through `transport` to `address` (Transport::connect).
  static std::shared_ptr<Connection> connect(dataplane::Transport& transport, uv_loop_t* loop,
                                             const std::string& address,
                                             const dataplane::ChannelOptions& options, Handlers handlers,
                                             dataplane::Transport::ConnectFn on_connected);
  // Takes the connection `listener` announced (Listener::accept).
  static std::shared_ptr<Connection> accept(dataplane::Listener& listener, const std::string& transport,
                                            Handlers handlers);

  Connection(std::shared_ptr<dataplane::Channel> channel, std::string transport)
      : channel_(std::move(channel)), transport_(std::move(transport)) {}

  // Channel::send with a control message type.
  void send(wire::MsgType type, uint64_t request_id, uint32_t flags, std::string msg,
            const void* payload = nullptr, uint64_t payload_len = 0, std::shared_ptr<void> keep = nullptr,
            std::function<void(genie_status_t)> done = nullptr) {
    channel_->send(static_cast<uint16_t>(type), request_id, flags, std::move(msg), payload, payload_len,
                   std::move(keep), std::move(done));
  }
  // Channel::send_tagged: the payload's semantic tag goes with it where the
  // transport carries tags (dpdk); the others send as send() does.
  void send_tagged(const dataplane::SemanticTag& tag, wire::MsgType type, uint64_t request_id, uint32_t flags,
                   std::string msg, const void* payload = nullptr, uint64_t payload_len = 0,
                   std::shared_ptr<void> keep = nullptr, std::function<void(genie_status_t)> done = nullptr) {
    channel_->send_tagged(tag, static_cast<uint16_t>(type), request_id, flags, std::move(msg), payload,
                          payload_len, std::move(keep), std::move(done));
  }
  // Inside on_frame: the tag the frame came with (Channel::received_tag).
  dataplane::SemanticTag received_tag() const { return channel_->received_tag(); }
  void close(genie_status_t status = GENIE_OK, const std::string& detail = "closed") {
    channel_->close(status, detail);
  }
  bool closed() const { return channel_->closed(); }
  std::string peer() const { return channel_->peer(); }
  std::string peer_identity() const { return channel_->peer_identity(); }
  std::vector<std::string> peer_names() const { return channel_->peer_names(); }
  std::string channel_binding() const { return channel_->channel_binding(); }
  void cork() { channel_->cork(); }
  void uncork() { channel_->uncork(); }
  void set_buffer_sizes(int bytes) { channel_->set_buffer_sizes(bytes); }
  void set_max_message(uint32_t bytes) { channel_->set_max_message(bytes); }
  // The channel itself, for remote memory access (Channel::put/get).
  const std::shared_ptr<dataplane::Channel>& channel() const { return channel_; }
  // The registry name of the transport the connection runs over.
  const std::string& transport() const { return transport_; }

 private:
  std::shared_ptr<dataplane::Channel> channel_;
  std::string transport_;
};

}  // namespace genie
