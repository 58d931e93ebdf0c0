// Graph submissions on the direct link (direct.hpp, "Submissions"): sending
// them, and collecting their completions on the thread that waits for them,
// or on the watcher when nobody does.
#include <poll.h>

#include <optional>

#include "control/client/direct_io.hpp"
#include "control/client/impl.hpp"
#include "core/spin.hpp"
#include "dataplane/tcp/tls.hpp"

namespace genie {

using namespace direct_io;

namespace {

// The client whose direct link this thread is reading (holding its mu): a
// completion it runs must not try to take the link again.
thread_local const void* t_reading = nullptr;

}  // namespace

RemoteClient::Impl::DirectReader::DirectReader(Impl& im) : prev(t_reading) { t_reading = &im; }
RemoteClient::Impl::DirectReader::~DirectReader() { t_reading = prev; }
bool RemoteClient::Impl::reading_direct() const { return t_reading == this; }

RemoteClient::Submission::~Submission() {
  if (auto i = im.lock()) i->direct_watch(call);
}

bool RemoteClient::Impl::direct_submit(const std::shared_ptr<Call>& call, const std::string& msg) {
  if (!cfg.direct_calls || loop->on_loop_thread() || reading_direct()) return false;
  if (direct.owed_count.load(std::memory_order_relaxed) >= kDirectMaxOwed) return false;
  if (direct.eligible.fetch_add(1, std::memory_order_relaxed) < kDirectAfterCalls) return false;
  // Opening the link, or finding it stale, needs the reader's mutex. A
  // thread reading holds it, and the link is then open: on plaintext a
  // submission goes out beside the read; TLS has one session for both
  // directions, so there it takes the loop.
  DirectTurn turn(direct);
  std::optional<DirectReader> reading;
  uint64_t epoch;
  if (turn.owns()) {
    reading.emplace(*this);
    if (!direct_open(true, &epoch)) return false;
  } else if (tls != nullptr) {
    return false;
  } else {
    std::lock_guard<std::mutex> lk(mu);
    if (state != State::Ready || !data_submit) return false;
    epoch = link_epoch;
  }
  std::vector<uint64_t> unsent;  // frees that did not go out
  const uint64_t rid = next_id.fetch_add(1);
  bool sent = false;
  size_t carried = 0;  // frees sent inside the submission
  {
    std::lock_guard<std::mutex> sending(direct.send_mu);
    if (direct.fd < 0 || direct.epoch != epoch) return false;
    Io io{direct.fd, direct.tls.get(), &direct.plain, &direct.taken, Deadline::after(timeout)};
    // Tensors freed before this submission: freed first, on the same
    // connection, as the loop does on the control connection.
    std::vector<uint64_t>& ids = direct.frees;
    ids.clear();
    bool carry;
    {
      std::lock_guard<std::mutex> lk(mu);
      ids.swap(frees);
      carry = submit_frees;
    }
    // One write for them all: each write on loopback costs the delivery
    // to the server's socket and a wake-up of its loop.
    std::string& frames = direct.out;
    frames.clear();
    // Inside the submission, where the server takes them and they fit in
    // its message (an id takes at most 10 bytes).
    carry = carry && !ids.empty() && msg.size() + 16 + ids.size() * 10 <= max_message;
    if (carry) {
      append_frame(&frames, call->send_type, rid, msg, ids);
    } else {
      frames.reserve((ids.size() + 1) * (wire::kHeaderSize + 16) + msg.size());
      for (uint64_t id : ids) {
        wire::TensorFree f;
        f.set_tensor_id(id);
        append_frame(&frames, MsgType::TensorFree, next_id.fetch_add(1), wire::encode_msg(f));
      }
      append_frame(&frames, call->send_type, rid, msg);
    }
    {
      std::lock_guard<std::mutex> lk(direct.owed_mu);
      direct.owed.emplace(rid, call);
      direct.owed_count.fetch_add(1, std::memory_order_relaxed);
    }
    try {
      iovec one{frames.data(), frames.size()};
      send_all(io, &one, 1);
      sent = true;
      if (carry) carried = ids.size();
    } catch (const LinkBroken&) {
      // Not sent whole, so never run: the loop sends it instead, and the
      // frees with it. The socket breaks, so that whoever reads it next
      // fails what it owed.
      std::lock_guard<std::mutex> lk(direct.owed_mu);
      if (direct.owed.erase(rid) > 0) direct.owed_count.fetch_sub(1, std::memory_order_relaxed);
      unsent.swap(ids);
    }
  }
  reading.reset();
  turn.release();
  if (!sent) {
    direct.interrupt();
    // The server may have had some of them: freeing twice is harmless.
    for (uint64_t id : unsent) queue_free(id);
    return false;
  }
  direct.submits.fetch_add(1, std::memory_order_relaxed);
  if (carried > 0) direct.frees_carried.fetch_add(carried, std::memory_order_relaxed);
  return true;
}

void RemoteClient::Impl::direct_completion(const wire::FrameHeader& fh, const std::string& msg) {
  // What ends the submission: its GraphDone or the server's error. A frame
  // found malformed below leaves it owed, so that the link's failure
  // completes it.
  const bool ends = fh.payload_len == 0 && (is_error(fh) || fh.type == MsgType::GraphDone);
  std::shared_ptr<Call> call;
  {
    std::lock_guard<std::mutex> lk(direct.owed_mu);
    if (auto it = direct.owed.find(fh.request_id); it != direct.owed.end()) {
      call = it->second;
      if (ends) {
        direct.owed.erase(it);
        direct.owed_count.fetch_sub(1, std::memory_order_relaxed);
      }
    }
  }
  if (!call)
    broke(Broke::Protocol, cat("a ", wire::type_name(fh.type), " for request ", fh.request_id,
                               ", which this connection did not send"));
  if (fh.payload_len != 0) broke(Broke::Protocol, "unexpected payload on a graph's completion");
  // Servers before the acceptance was dropped send one ahead of the
  // GraphDone; it carries nothing this client needs.
  if (!is_error(fh) && fh.type == MsgType::SubmitAccepted) return;
  if (!ends) broke(Broke::Protocol, cat("unexpected ", wire::type_name(fh.type), " for a graph submission"));
  if (is_error(fh) && call->send_type == MsgType::GraphSubmitDelta && unknown_base(msg)) {
    // The same submission again in full, on the same connection.
    std::string full;
    if (std::string why = full_submission(*call, &full); !why.empty()) {
      direct_done(*call, RemoteResult{GENIE_ERR_TOO_LARGE, std::move(why), {}, 0});
      return;
    }
    const uint64_t rid = next_id.fetch_add(1);
    {
      std::lock_guard<std::mutex> lk(direct.owed_mu);
      direct.owed.emplace(rid, call);
      direct.owed_count.fetch_add(1, std::memory_order_relaxed);
    }
    std::lock_guard<std::mutex> sending(direct.send_mu);
    Io io{direct.fd, direct.tls.get(), &direct.plain, &direct.taken, Deadline::after(timeout)};
    send_frame(io, MsgType::GraphSubmit, rid, full, nullptr, 0);
    return;
  }
  if (is_error(fh)) {
    auto [st, detail] = parse_error(msg);
    direct_done(*call, RemoteResult{st, std::move(detail), {}, 0});
    return;
  }
  direct_done(*call, parse_done(msg));
}

void RemoteClient::Impl::direct_done(Call& call, RemoteResult&& r) {
  run_done(call, std::move(r));
  {
    std::lock_guard<std::mutex> lk(call.mu);
    call.completed.store(true, std::memory_order_release);
    if (call.watched) direct.watched.fetch_sub(1, std::memory_order_relaxed);
  }
  direct.next_turn();
}

void RemoteClient::Impl::direct_failed(genie_status_t st, const std::string& detail) {
  std::unordered_map<uint64_t, std::shared_ptr<Call>> owed;
  {
    std::lock_guard<std::mutex> sending(direct.send_mu);
    direct.reset();
    std::lock_guard<std::mutex> lk(direct.owed_mu);
    owed.swap(direct.owed);
    direct.owed_count.store(0, std::memory_order_relaxed);
  }
  for (auto& [rid, call] : owed) direct_done(*call, RemoteResult{st, detail, {}, 0});
}

void RemoteClient::Impl::direct_read(const std::function<bool()>& until, Clock::time_point deadline) {
  DirectReader reading(*this);
  bool spin = deadline - Clock::now() >= kReplySpin;
  std::string& msg = direct.msg;  // each frame's message, in one buffer
  while (!until() && direct.owed_count.load() > 0) {
    try {
      if (direct.fd < 0) broke(Broke::Closed, "the connection was closed");
      // Bytes received and not yet taken are a frame's start; else wait for
      // the socket until the caller's deadline (nothing read yet: not an
      // error).
      if (direct.taken == direct.plain.size()) {
        try {
          Deadline until_deadline(deadline);
          wait_for(direct.fd, POLLIN, until_deadline, spin);
        } catch (const LinkBroken& b) {
          if (b.why == Broke::Timeout) return;
          throw;
        }
      }
      spin = false;
      // A frame has begun: the rest of it within the timeout.
      Io io{direct.fd, direct.tls.get(), &direct.plain, &direct.taken, Deadline::after(timeout)};
      const wire::FrameHeader fh = read_frame(io, max_message, &msg, false);
      direct.heard = Clock::now();
      direct_completion(fh, msg);
    } catch (const LinkBroken& b) {
      const Error e = direct_error(b, "graph submit");
      direct_failed(e.code(), e.detail());
      return;
    }
  }
}

void RemoteClient::Impl::direct_collect(const std::shared_ptr<Call>& call, Clock::time_point deadline) {
  // A completion this thread runs while reading: the reader, when it goes
  // on, completes this call too.
  if (reading_direct()) return;
  const auto finished = [&] { return call->completed.load(std::memory_order_acquire); };
  while (!finished()) {
    uint64_t seen;
    {
      std::lock_guard<std::mutex> lk(direct.wait_mu);
      seen = direct.turns;
    }
    DirectTurn turn(direct);
    if (turn.owns()) {
      direct_read(finished, deadline);
      return;
    }
    // Another thread reads the link: it completes this call, or lets the
    // link go for this one to read.
    std::unique_lock<std::mutex> lk(direct.wait_mu);
    if (!direct.wait_cv.wait_until(lk, deadline, [&] { return finished() || direct.turns != seen; })) return;
  }
}

void RemoteClient::Impl::direct_watch(const std::shared_ptr<Call>& call) {
  if (call->completed.load(std::memory_order_acquire)) return;  // the common case: it was waited for
  {
    std::lock_guard<std::mutex> lk(call->mu);
    if (call->watched || call->completed.load()) return;
    call->watched = true;
    direct.watched.fetch_add(1, std::memory_order_relaxed);
  }
  start_watcher();
}

void RemoteClient::Impl::direct_drain() {
  {
    std::lock_guard<std::mutex> lk(direct.wait_mu);
    if (direct.drain) return;
    direct.drain = true;
  }
  if (direct.owed_count.load() > 0) start_watcher();
}

void RemoteClient::Impl::start_watcher() {
  {
    std::lock_guard<std::mutex> lk(direct.wait_mu);
    if (direct.watcher_stop) return;
    if (!direct.watcher.joinable())
      direct.watcher = std::thread([self = shared_from_this()] { self->watch_completions(); });
  }
  direct.wait_cv.notify_all();
}

void RemoteClient::Impl::watch_completions() {
  // Holds the link in slices, so that a caller's submission or transfer
  // finds it free between them even while a long graph runs.
  constexpr auto kSlice = std::chrono::milliseconds(20);
  const auto wanted = [&] {
    return direct.owed_count.load() > 0 && (direct.drain || direct.watched.load() > 0);
  };
  for (;;) {
    uint64_t seen;
    {
      std::unique_lock<std::mutex> lk(direct.wait_mu);
      direct.wait_cv.wait(lk, [&] { return direct.watcher_stop || wanted(); });
      if (direct.watcher_stop) return;
      seen = direct.turns;
    }
    {
      DirectTurn turn(direct);
      if (turn.owns()) {
        direct_read([&] { return !wanted(); }, Clock::now() + kSlice);
        continue;
      }
    }
    std::unique_lock<std::mutex> lk(direct.wait_mu);
    direct.wait_cv.wait_for(lk, kSlice, [&] { return direct.watcher_stop || direct.turns != seen; });
  }
}

void RemoteClient::Impl::direct_lost(const std::string& why) {
  DirectTurn turn(direct);
  if (!turn.owns()) {
    // A reader holds it: its socket breaks now, and it fails what the link
    // owes.
    direct.interrupt();
    return;
  }
  DirectReader reading(*this);
  direct_failed(GENIE_ERR_CONNECTION, cat("connection to ", addr, " lost: ", why));
}

void RemoteClient::Impl::direct_close() {
  std::thread watcher;
  {
    std::lock_guard<std::mutex> lk(direct.wait_mu);
    direct.watcher_stop = true;
    watcher = std::move(direct.watcher);
  }
  direct.wait_cv.notify_all();
  if (watcher.joinable()) {
    if (watcher.get_id() == std::this_thread::get_id())
      watcher.detach();  // closed from a completion it ran: it ends by itself
    else
      watcher.join();
  }
  if (reading_direct()) {
    // Closed from a completion this thread runs while reading: the socket
    // is shut down, so the reader fails what the link owes.
    return;
  }
  std::lock_guard<std::mutex> own(direct.mu);  // a reader has ended (shut down before)
  DirectReader reading(*this);
  direct_failed(GENIE_ERR_SHUTDOWN, cat("the connection to ", addr, " has been closed (shut down)"));
}

}  // namespace genie
