// Close hooks per libuv loop: how a channel or listener learns that the
// loop it lives on is being torn down (LoopThread::stop), so that it closes
// with its own close callback instead of being swept up by a uv_walk that
// would leave its completions unanswered.
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

}  // namespace genie::dataplane
