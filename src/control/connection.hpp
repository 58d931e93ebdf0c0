// The control plane's connection: the TCP transport's framed connection
// (dataplane/tcp/connection.hpp) speaking control's message types. Frames
// of a type wire::known_type does not know close it from their header;
// handlers see headers whose type is a wire::MsgType.
//
// Everything else (threads, lifetime, the order of callbacks once closing,
// cork/uncork, connect, socket options) is the TCP connection's.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "control/wire.hpp"
#include "dataplane/tcp/connection.hpp"

namespace genie {

using dataplane::PayloadSink;

class Connection : public dataplane::tcp::Connection {
 public:
  struct Handlers {
    // As dataplane::ChannelHandlers::on_frame, with control's header.
    std::function<PayloadSink(const wire::FrameHeader&, std::string&& msg)> on_frame;
    // As dataplane::ChannelHandlers::on_close.
    std::function<void(genie_status_t status, const std::string& detail)> on_close;
  };

  static std::shared_ptr<Connection> create(uv_loop_t* loop, uint32_t max_message, Handlers handlers);

  // dataplane::tcp::Connection::send with a control message type.
  void send(wire::MsgType type, uint64_t request_id, uint32_t flags, std::string msg,
            const void* payload = nullptr, uint64_t payload_len = 0, std::shared_ptr<void> keep = nullptr,
            std::function<void(genie_status_t)> done = nullptr) {
    dataplane::tcp::Connection::send(static_cast<uint16_t>(type), request_id, flags, std::move(msg), payload,
                                     payload_len, std::move(keep), std::move(done));
  }

 private:
  using dataplane::tcp::Connection::Connection;
};

}  // namespace genie
