// Close ordering: pending writes fail, the handle closes, then connect's
// callback and the owner's on_close run once (connection_impl.hpp).
#include "dataplane/tcp/connection_impl.hpp"

namespace genie::dataplane::tcp {

void Connection::Impl::on_closed(uv_handle_t* h) {
  auto* c = static_cast<Impl*>(h->data);
  // Declared first, destroyed last: the Connection outlives everything
  // below, and may die with it.
  std::shared_ptr<Connection> self = std::move(c->self);
  if (c->hook_id != 0) remove_close_hook(c->loop, c->hook_id);
  c->hook_id = 0;
  if (c->connect_cb) {
    if (c->connect_failed) {
      c->finish_connect(c->close_status, c->close_detail);
    } else {
      c->finish_connect(GENIE_ERR_CONNECTION,
                        cat("cannot connect to ", c->target,
                            ": connection closed before it was established (", c->close_detail, ")"));
    }
  }
  finish_frames(c->tls_waiting, GENIE_ERR_CONNECTION);
  c->tls_waiting.clear();
  c->sink = PayloadSink();
  c->msg = std::string();
  c->release_charge();
  Handlers handlers = std::move(c->handlers);
  c->handlers = Handlers();
  if (handlers.on_close)
    guarded_log([&] { handlers.on_close(c->close_status, c->close_detail); }, "on_close");
}

void Connection::close(genie_status_t status, const std::string& detail) {
  if (closing_) return;
  closing_ = true;
  Impl* c = impl_.get();
  c->close_status = status;
  c->close_detail = detail;
  if (!c->corked.empty()) {
    // What the owner sent before closing goes out as far as the kernel takes
    // it at once (e.g. the ErrorReply explaining the close); the rest is
    // cancelled with the handle.
    std::vector<Impl::OutFrame> frames = std::move(c->corked);
    c->corked.clear();
    if (c->established)
      c->write_frames(std::move(frames), true);
    else
      Impl::finish_frames(frames, GENIE_ERR_CONNECTION);
  }
  // A lookup already running cannot be cancelled; its callback then sees
  // closing_ and stops.
  if (c->resolving != nullptr) uv_cancel(reinterpret_cast<uv_req_t*>(&c->resolving->req));
  uv_close(c->handle(), Impl::on_closed);
}

}  // namespace genie::dataplane::tcp
