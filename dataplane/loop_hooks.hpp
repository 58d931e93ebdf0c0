// Close hooks per libuv loop: how a channel or listener learns that the
// loop it lives on is being torn down (LoopThread::stop), so that it closes
// with its own close callback instead of being swept up by a uv_walk that
// would leave its completions unanswered. And a count of the frames a
// loop's connections received, which tells the loop's owner how busy it is.
//
// Hooks are registered and removed on the loop's thread; run_close_hooks()
// runs on it too. The table is shared by every loop in the process (guarded
// by a mutex), and a hook may add or remove hooks while it runs.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>

namespace genie::dataplane {

// Registers `fn` to run when `loop` is torn down, on every teardown pass
// until removed (so it must be idempotent, e.g. Channel::close). Returns an
// id for remove_close_hook (never 0).
uint64_t add_close_hook(uv_loop_t* loop, std::function<void()> fn);
void remove_close_hook(uv_loop_t* loop, uint64_t id);

// Runs the hooks of `loop` registered when it started, in registration
// order; one that throws is logged and the others still run.
void run_close_hooks(uv_loop_t* loop);

// Forgets every hook of `loop` (it is about to be closed).
void clear_close_hooks(uv_loop_t* loop);

// Whole frames (a message and all of its payload) that connections have
// received on the calling thread, which is their loop's. A loop that just
// received a request expects the next one soon and goes on polling for it
// (control/loop_thread.cpp); a frame still in the middle of its payload
// does not count, since a long transfer gains nothing from polling.
uint64_t frames_received_here();
// Counts one such frame; called by connections on their loop's thread.
void note_frame_received();

}  // namespace genie::dataplane
