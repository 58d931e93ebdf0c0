#include "control/connection.hpp"

namespace genie {
namespace {

dataplane::ChannelHandlers channel_handlers(Connection::Handlers handlers) {
  dataplane::ChannelHandlers h;
  h.types = wire::frame_types();
  if (handlers.on_frame) {
    h.on_frame = [on_frame = std::move(handlers.on_frame)](const dataplane::FrameHeader& fh,
                                                           std::string&& msg) {
      return on_frame(wire::from_frame(fh), std::move(msg));
    };
  }
  h.on_close = std::move(handlers.on_close);
  return h;
}

}  // namespace

std::shared_ptr<Connection> Connection::connect(dataplane::Transport& transport, uv_loop_t* loop,
                                                const std::string& address,
                                                const dataplane::ChannelOptions& options, Handlers handlers,
                                                dataplane::Transport::ConnectFn on_connected) {
  auto ch = transport.connect(loop, address, options, channel_handlers(std::move(handlers)),
                              std::move(on_connected));
  return std::make_shared<Connection>(std::move(ch), transport.capabilities().name);
}

std::shared_ptr<Connection> Connection::accept(dataplane::Listener& listener, const std::string& transport,
                                               Handlers handlers) {
  return std::make_shared<Connection>(listener.accept(channel_handlers(std::move(handlers))), transport);
}

}  // namespace genie
