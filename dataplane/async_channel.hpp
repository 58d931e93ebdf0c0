// The life of a channel whose events come from outside its owner's loop
// (another loop, a polling thread) and reach it through a uv_async wake-up:
// the handle, the self reference that keeps the channel alive until the
// handle has closed, the close hook a loop being torn down runs, and the
// end, in the order transport.hpp requires: the pending connect callback
// fails, then on_close runs, last and once. Header-only, for the plugins
// (loopback, dpdk), which compile it into themselves.
//
// Derived (CRTP) provides on_wake() (the handle was signalled: take the
// events), on_teardown() (the loop is being torn down: finish now) and may
// provide release_before_close() (drop what the owner lent, e.g. a sink).
#pragma once

#include <uv.h>

#include <memory>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "dataplane/guarded.hpp"
#include "dataplane/plugin.hpp"

namespace genie::dataplane {

template <class Derived>
class AsyncChannel : public Channel, public std::enable_shared_from_this<Derived> {
 public:
  std::string peer() const override { return peer_; }
  bool closed() const override { return closing_; }

 protected:
  AsyncChannel(const TransportHost* host, const char* name, uv_loop_t* loop, ChannelHandlers handlers,
               std::string peer)
      : host_(host), name_(name), loop_(loop), handlers_(std::move(handlers)), peer_(std::move(peer)) {}

  // Loop thread: opens the wake-up handle, takes the self reference and
  // registers the close hook.
  void open_handle() {
    const int rc = uv_async_init(loop_, &async_, [](uv_async_t* a) { static_cast<Derived*>(a->data)->on_wake(); });
    if (rc != 0) fail(GENIE_ERR_INTERNAL, "uv_async_init: ", uv_strerror(rc));
    async_.data = static_cast<Derived*>(this);
    self_ = this->shared_from_this();
    std::weak_ptr<Derived> weak = self_;
    hook_ = host_->add_close_hook(loop_, [weak] {
      if (auto c = weak.lock()) c->on_teardown();
    });
  }

  // Closes the handle; its close callback ends the channel (closed_cb) and
  // lets go of the self reference.
  void close_handle() {
    host_->remove_close_hook(loop_, hook_);
    uv_close(reinterpret_cast<uv_handle_t*>(&async_), [](uv_handle_t* h) {
      auto* c = static_cast<AsyncChannel*>(static_cast<Derived*>(h->data));
      std::shared_ptr<Derived> self = std::move(c->self_);  // may die at the end of this callback
      c->closed_cb();
    });
  }

  void release_before_close() {}

  // Runs fn; an exception it throws is logged, never passed on.
  template <class Fn>
  void log_guarded(Fn&& fn, const char* what) {
    genie_status_t st = GENIE_OK;
    std::string detail;
    if (!guarded(std::forward<Fn>(fn), &st, &detail, what) && host_ != nullptr)
      host_->log(LogLevel::Error, cat(name_, ": ", what, ": ", detail));
  }

  const TransportHost* host_;
  const char* name_;  // the transport, for the log
  uv_loop_t* loop_;
  ChannelHandlers handlers_;
  const std::string peer_;
  uv_async_t async_{};
  uint64_t hook_ = 0;
  Transport::ConnectFn connect_cb_;
  std::string connect_failed_;  // why the connect failed, when it did
  bool established_ = false;
  bool closing_ = false;
  bool finished_ = false;
  genie_status_t close_status_ = GENIE_OK;
  std::string close_detail_;

 private:
  void closed_cb() {
    static_cast<Derived*>(this)->release_before_close();
    if (auto cb = std::exchange(connect_cb_, nullptr)) {
      const std::string why =
          !connect_failed_.empty()
              ? connect_failed_
              : cat("cannot connect to ", peer_, ": closed before it was established (", close_detail_, ")");
      log_guarded([&] { cb(GENIE_ERR_CONNECTION, why); }, "connect callback");
    }
    ChannelHandlers h = std::move(handlers_);
    handlers_ = ChannelHandlers();
    if (h.on_close) log_guarded([&] { h.on_close(close_status_, close_detail_); }, "on_close");
  }

  std::shared_ptr<Derived> self_;  // until the handle has closed
};

}  // namespace genie::dataplane
