#include "control/connection.hpp"

namespace genie {

std::shared_ptr<Connection> Connection::create(uv_loop_t* loop, uint32_t max_message, Handlers handlers) {
  dataplane::ChannelHandlers h;
  h.types = wire::frame_types();
  if (handlers.on_frame) {
    h.on_frame = [on_frame = std::move(handlers.on_frame)](const dataplane::FrameHeader& fh, std::string&& msg) {
      return on_frame(wire::from_frame(fh), std::move(msg));
    };
  }
  h.on_close = std::move(handlers.on_close);
  // The constructor is private, so make_shared cannot reach it.
  std::shared_ptr<Connection> conn(new Connection(loop, max_message, std::move(h)));
  conn->init();
  return conn;
}

}  // namespace genie
