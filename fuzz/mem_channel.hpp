// An in-memory channel for the server harness (server_fuzz.cpp): the bytes
// a peer would send are fed in, decoded as a TCP connection decodes them
// (dataplane/frame.hpp: the header checked against the current limit and the
// frame types, the CRC, the payload into the sink the handler returned),
// and what the server sends is kept. No socket, no thread: everything runs
// on the server's loop thread, inside Server::run_in_loop.
#pragma once

#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "dataplane/frame.hpp"
#include "dataplane/transport.hpp"

namespace genie::fuzz {

class MemChannel final : public dataplane::Channel {
 public:
  struct Sent {
    uint16_t type;
    std::string msg;
  };

  MemChannel(dataplane::ChannelHandlers h, std::string peer) : h_(std::move(h)), peer_(std::move(peer)) {}

  // Bytes from the peer: every frame they complete is delivered, in order.
  void feed(const void* data, size_t n) {
    if (closing_) return;
    in_.append(static_cast<const char*>(data), n);
    while (!closing_ && deliver_one()) settle();
    settle();
  }
  // The peer hung up (a half-close: the server closes in turn).
  void peer_closed() {
    close(GENIE_ERR_CONNECTION, "the peer closed the connection");
    settle();
  }
  // What the server sent since the last take.
  std::deque<Sent>& sent() { return sent_; }

  void send(uint16_t type, uint64_t, uint32_t, std::string msg, const void* payload, uint64_t payload_len,
            std::shared_ptr<void>, Done done) override {
    genie_status_t st = GENIE_OK;
    if (closing_) {
      st = GENIE_ERR_CONNECTION;
    } else if (msg.size() > max_message_) {
      st = GENIE_ERR_TOO_LARGE;
    } else {
      // The payload is read, as a socket write would: ASan sees a bad range.
      if (payload_len > 0) scratch_.assign(static_cast<const char*>(payload), payload_len);
      if (sent_.size() < 1024) sent_.push_back({type, std::move(msg)});
    }
    if (done) dones_.emplace_back(std::move(done), st);
  }
  void close(genie_status_t status, const std::string& detail) override {
    if (closing_) return;
    closing_ = true;
    close_status_ = status;
    close_detail_ = detail;
    sink_ = {};
  }
  bool closed() const override { return closing_; }
  std::string peer() const override { return peer_; }
  void set_max_message(uint32_t bytes) override { max_message_ = bytes; }

 private:
  // Runs what a transport runs after the current callback returned: send
  // completions, then on_close once.
  void settle() {
    while (!dones_.empty()) {
      auto [done, st] = std::move(dones_.front());
      dones_.pop_front();
      done(st);
    }
    if (closing_ && !close_reported_) {
      close_reported_ = true;
      auto on_close = std::move(h_.on_close);
      h_ = {};
      if (on_close) on_close(close_status_, close_detail_);
    }
  }

  // One step of decoding: a payload's bytes, or one whole frame. False when
  // more bytes are needed.
  bool deliver_one() {
    if (payload_left_ > 0) {
      if (in_.empty()) return false;
      const size_t k = in_.size() < payload_left_ ? in_.size() : static_cast<size_t>(payload_left_);
      std::memcpy(static_cast<char*>(sink_.dst) + payload_done_, in_.data(), k);
      in_.erase(0, k);
      payload_done_ += k;
      payload_left_ -= k;
      if (payload_left_ == 0) {
        auto done = std::move(sink_.done);
        sink_ = {};
        guarded([&] {
          if (done) done();
        });
      }
      return true;
    }
    if (in_.size() < dataplane::kFrameHeaderSize) return false;
    const auto* hdr = reinterpret_cast<const uint8_t*>(in_.data());
    dataplane::FrameHeader fh;
    if (!guarded([&] { fh = dataplane::decode_frame_header(hdr, max_message_, h_.types); })) return false;
    if (in_.size() < dataplane::kFrameHeaderSize + fh.msg_len) return false;
    std::string msg = in_.substr(dataplane::kFrameHeaderSize, fh.msg_len);
    if (!guarded([&] { dataplane::verify_frame_crc(hdr, msg.data(), msg.size(), h_.types); })) return false;
    in_.erase(0, dataplane::kFrameHeaderSize + fh.msg_len);
    dataplane::PayloadSink sink;
    if (!guarded([&] { sink = h_.on_frame(fh, std::move(msg)); })) return false;
    if (fh.payload_len > 0 && !closing_) {
      if (sink.dst == nullptr) {
        close(GENIE_ERR_PROTOCOL, "payload refused");
        return false;
      }
      sink_ = std::move(sink);
      payload_left_ = fh.payload_len;
      payload_done_ = 0;
    }
    return true;
  }

  // Runs f; an exception closes the channel as a transport's would.
  template <class F>
  bool guarded(F&& f) {
    try {
      f();
      return !closing_;
    } catch (const Error& e) {
      close(e.code(), e.detail());
    } catch (const std::exception& e) {
      close(GENIE_ERR_INTERNAL, e.what());
    }
    return false;
  }

  dataplane::ChannelHandlers h_;
  const std::string peer_;
  std::string in_;
  uint32_t max_message_ = dataplane::kDefaultMaxMessage;
  dataplane::PayloadSink sink_;
  uint64_t payload_left_ = 0;
  uint64_t payload_done_ = 0;
  std::deque<std::pair<Done, genie_status_t>> dones_;
  std::deque<Sent> sent_;
  std::string scratch_;
  bool closing_ = false;
  bool close_reported_ = false;
  genie_status_t close_status_ = GENIE_OK;
  std::string close_detail_;
};

// Hands one MemChannel to Server::adopt.
class MemListener final : public dataplane::Listener {
 public:
  explicit MemListener(std::string peer) : peer_(std::move(peer)) {}
  std::string address() const override { return "mem"; }
  std::shared_ptr<dataplane::Channel> accept(dataplane::ChannelHandlers handlers) override {
    channel = std::make_shared<MemChannel>(std::move(handlers), peer_);
    return channel;
  }
  void close() override {}
  std::shared_ptr<MemChannel> channel;

 private:
  std::string peer_;
};

}  // namespace genie::fuzz
