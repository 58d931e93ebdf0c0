#include "collective.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <climits>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "core/error.hpp"
#include "buffer_pool.hpp"
#include "pattern.hpp"

namespace genie::replay {

namespace {

uint64_t split(uint64_t off, uint64_t len, uint64_t k, uint64_t j) { return off + len * j / k; }

bool pow2(int k) { return k > 0 && (k & (k - 1)) == 0; }

struct Range {
  uint64_t off = 0, len = 0;  // elements
};

// One transfer of a step.
struct Xfer {
  int peer;
  void* ptr;
  uint64_t elems;
  uint64_t key;
};

// One chunk of one collective on this rank.
class ChunkRun {
 public:
  ChunkRun(RunEnv& env, const CollSpec& spec, uint32_t chunk, const std::vector<int>& group, int me)
      : env_(env), spec_(spec), chunk_(chunk), group_(group), me_(me) {}

  // Posts every receive, then every send, and waits for all of them.
  void step(const std::vector<Xfer>& sends, const std::vector<Xfer>& recvs) {
    if (begin_ < 0) begin_ = env_.timeline.now_ns();
    const bool ev = env_.timeline.events();
    std::vector<std::pair<Fabric::OpPtr, const Xfer*>> ops;
    for (const Xfer& r : recvs) ops.emplace_back(env_.fabric.irecv(r.peer, r.key, r.ptr, r.elems * 4), &r);
    const size_t nrecv = ops.size();
    for (const Xfer& s : sends) ops.emplace_back(env_.fabric.isend(s.peer, s.key, s.ptr, s.elems * 4), &s);
    mark_issued();
    for (size_t n = 0; n < ops.size(); ++n) {
      const bool is_recv = n < nrecv;
      const Xfer* x = ops[n].second;
      const int64_t t0 = ev ? env_.timeline.now_ns() : 0;
      env_.fabric.wait(ops[n].first, [&] {
        return cat(is_recv ? "a receive from rank " : "a send to rank ", x->peer, " of ", x->elems * 4, " bytes in ",
                   coll_type_name(spec_.type), " #", spec_.seq, " chunk ", chunk_, " (", spec_.name, ")");
      });
      if (ev)
        env_.timeline.add(TraceEvent{cat(is_recv ? "recv from " : "send to ", x->peer, " ", x->elems * 4, " B"),
                                     is_recv ? "recv" : "send", t0, env_.timeline.now_ns() - t0, env_.lane});
    }
  }

  // One transfer in flight, for algorithms that post every receive of
  // theirs up front (so that no payload waits in a staging buffer).
  struct Posted {
    Fabric::OpPtr op;
    Xfer x;
    bool recv;
  };
  // A receive may be posted before the rank's own data is ready (so that
  // a neighbour that is ahead finds it posted and its bytes land in place,
  // not in a staging buffer); the span of communication starts with the
  // first send or wait.
  Posted post(const Xfer& x, bool recv) {
    if (begin_ < 0 && !recv) begin_ = env_.timeline.now_ns();
    Posted p{recv ? env_.fabric.irecv(x.peer, x.key, x.ptr, x.elems * 4)
                  : env_.fabric.isend(x.peer, x.key, x.ptr, x.elems * 4),
             x, recv};
    mark_issued();
    return p;
  }
  void wait(const Posted& p) {
    if (begin_ < 0) begin_ = env_.timeline.now_ns();
    const bool ev = env_.timeline.events();
    const int64_t t0 = ev ? env_.timeline.now_ns() : 0;
    env_.fabric.wait(p.op, [&] {
      return cat(p.recv ? "a receive from rank " : "a send to rank ", p.x.peer, " of ", p.x.elems * 4, " bytes in ",
                 coll_type_name(spec_.type), " #", spec_.seq, " chunk ", chunk_, " (", spec_.name, ")");
    });
    if (ev)
      env_.timeline.add(TraceEvent{cat(p.recv ? "wait recv from " : "wait send to ", p.x.peer, " ", p.x.elems * 4, " B"),
                                   p.recv ? "recv" : "send", t0, env_.timeline.now_ns() - t0, env_.lane});
  }

  void mark_issued() {
    if (issued_) return;
    issued_ = true;
    if (env_.issued) env_.issued();
  }

  // The span of communication (and reduction): from the first step to
  // end_comm(), before the check.
  void end_comm() {
    if (begin_ >= 0 && end_ < 0) end_ = env_.timeline.now_ns();
  }
  std::pair<int64_t, int64_t> span() const { return {begin_, end_}; }

  uint64_t key(uint32_t stage, uint32_t s, uint32_t seg = 0) const {
    return coll_key(spec_.comm, spec_.seq, chunk_, stage, s, seg);
  }

  // A ring step's block moves in segments of about segment_bytes (at most
  // kMaxSegments), so that a rank forwards (and reduces) one segment while
  // the next is still arriving instead of waiting for the whole block.
  static constexpr uint32_t kMaxSegments = 256;
  uint32_t segments(uint64_t elems) const {
    const uint64_t seg = env_.system.segment_bytes;
    return static_cast<uint32_t>(std::clamp<uint64_t>((elems * 4 + seg - 1) / seg, 1, kMaxSegments));
  }
  static Range segment(const Range& r, uint32_t n, uint32_t g) {
    return Range{split(r.off, r.len, n, g), split(r.off, r.len, n, g + 1) - split(r.off, r.len, n, g)};
  }

  // The receives of a ring reduce-scatter, posted, and their staging slots.
  struct RingRecvs {
    Scratch<float> tmp;
    uint64_t slot = 0;  // elements per step
    std::vector<Posted> recvs;
  };
  void ring_rs_recvs(RingRecvs& out, Range r, const std::vector<int>& m, int i, uint32_t stage) {
    const int k = static_cast<int>(m.size());
    const int left = m[(i - 1 + k) % k];
    for (int j = 0; j < k; ++j) out.slot = std::max(out.slot, ring_block(r, k, j).len);
    out.tmp.resize(out.slot * (k - 1));
    for (int s = 0; s < k - 1; ++s) {
      const Range rb = ring_block(r, k, (i - s - 2 + 2 * k) % k);
      for (uint32_t g = 0, S = segments(rb.len); g < S; ++g) {
        const Range sg = segment(rb, S, g);
        out.recvs.push_back(
            post({left, out.tmp.data() + out.slot * s + (sg.off - rb.off), sg.len, key(stage, s, g)}, true));
      }
    }
  }

  // Reduce-scatter of `r` among `m` (this rank is m[i]); returns its part.
  // `pre`: the receives of a ring, already posted (ring_rs_recvs).
  Range reduce_scatter(float* buf, Range r, const std::vector<int>& m, int i, Algo algo, uint32_t stage,
                       RingRecvs* pre = nullptr) {
    const int k = static_cast<int>(m.size());
    auto part = [&](int j) { return Range{split(r.off, r.len, k, j), split(r.off, r.len, k, j + 1) - split(r.off, r.len, k, j)}; };
    if (k == 1) return r;
    if (algo == Algo::Direct) {
      const Range mine = part(i);
      Scratch<float> tmp(mine.len * (k - 1));
      std::vector<Xfer> sends, recvs;
      int n = 0;
      for (int j = 0; j < k; ++j) {
        if (j == i) continue;
        sends.push_back({m[j], buf + part(j).off, part(j).len, key(stage, 0)});
        recvs.push_back({m[j], tmp.data() + mine.len * n++, mine.len, key(stage, 0)});
      }
      step(sends, recvs);
      for (int j = 0; j < k - 1; ++j) reduce_into(buf + mine.off, tmp.data() + mine.len * j, mine.len);
      return mine;
    }
    if (algo == Algo::HalvingDoubling && pow2(k)) {
      int lo = 0, hi = k;
      Scratch<float> tmp;
      for (uint32_t s = 0; hi - lo > 1; ++s) {
        const int half = (hi - lo) / 2, mid = lo + half;
        const bool low = i < mid;
        const int partner = low ? i + half : i - half;
        const Range keep{split(r.off, r.len, k, low ? lo : mid), 0}, give{split(r.off, r.len, k, low ? mid : lo), 0};
        const uint64_t keep_len = split(r.off, r.len, k, low ? mid : hi) - keep.off;
        const uint64_t give_len = split(r.off, r.len, k, low ? hi : mid) - give.off;
        tmp.resize(keep_len);
        step({{m[partner], buf + give.off, give_len, key(stage, s)}}, {{m[partner], tmp.data(), keep_len, key(stage, s)}});
        reduce_into(buf + keep.off, tmp.data(), keep_len);
        if (low) hi = mid; else lo = mid;
      }
      return part(i);
    }
    // Ring (also the reduce-scatter of a double binary tree dimension and
    // of halving-doubling on a group size that is not a power of two).
    // Step s sends the part reduced in step s - 1, pipelined by segment:
    // segment g goes on as soon as it is reduced, while the next one is
    // still arriving. Every receive is posted first (here, or by the
    // caller through ring_rs_recvs), each into its own staging slot.
    const int right = m[(i + 1) % k];
    RingRecvs own;
    if (!pre) {
      ring_rs_recvs(own, r, m, i, stage);
      pre = &own;
    }
    const uint64_t slot = pre->slot;
    Scratch<float>& tmp = pre->tmp;
    const std::vector<Posted>& recvs = pre->recvs;
    auto rpart = [&](int s) { return part((i - s - 2 + 2 * k) % k); };  // received (and reduced) in step s
    std::vector<Posted> sends;
    const Range first = part((i - 1 + k) % k);
    for (uint32_t g = 0, S = segments(first.len); g < S; ++g) {
      const Range sg = segment(first, S, g);
      sends.push_back(post({right, buf + sg.off, sg.len, key(stage, 0, g)}, false));
    }
    size_t n = 0;
    for (int s = 0; s < k - 1; ++s) {
      const Range rb = rpart(s);
      for (uint32_t g = 0, S = segments(rb.len); g < S; ++g, ++n) {
        const Range sg = segment(rb, S, g);
        wait(recvs[n]);
        reduce_into(buf + sg.off, tmp.data() + slot * s + (sg.off - rb.off), sg.len);
        if (s + 1 < k - 1) sends.push_back(post({right, buf + sg.off, sg.len, key(stage, s + 1, g)}, false));
      }
    }
    for (const Posted& p : sends) wait(p);
    return part(i);
  }

  // All-gather of `r` among `m`: m[j] holds part j; afterwards all do.
  void all_gather(uint32_t* buf, Range r, const std::vector<int>& m, int i, Algo algo, uint32_t stage) {
    const int k = static_cast<int>(m.size());
    auto b = [&](int j) { return split(r.off, r.len, k, j); };
    auto xf = [&](int peer, int lo, int hi, uint32_t s) { return Xfer{peer, buf + b(lo), b(hi) - b(lo), key(stage, s)}; };
    if (k == 1) return;
    if (algo == Algo::Direct) {
      std::vector<Xfer> sends, recvs;
      for (int j = 0; j < k; ++j) {
        if (j == i) continue;
        sends.push_back(xf(m[j], i, i + 1, 0));
        recvs.push_back(xf(m[j], j, j + 1, 0));
      }
      step(sends, recvs);
      return;
    }
    if (algo == Algo::HalvingDoubling && pow2(k)) {
      uint32_t s = 0;
      for (int size = 1; size < k; size *= 2, ++s) {
        const int mine = i & ~(size - 1), theirs = mine ^ size;
        const int partner = i ^ size;
        step({xf(m[partner], mine, mine + size, s)}, {xf(m[partner], theirs, theirs + size, s)});
      }
      return;
    }
    ring_gather(buf, r, m, i, stage, ring_gather_recvs(buf, r, m, i, stage));
  }

  // A ring all-gather of `r` among `m` in two halves: posting every
  // receive (each segment into its final place), then forwarding segment
  // by segment as each arrives (step s forwards the part received in step
  // s - 1). A one-dimension ring all-reduce posts the receives of its
  // all-gather before its reduce-scatter starts, so that a neighbour that
  // is ahead never has its segments wait in the data plane's buffers: a
  // segment of part p reaches this rank only after the whole ring has
  // reduced part p, which includes this rank's reduce and send of it.
  std::vector<Posted> ring_gather_recvs(uint32_t* buf, Range r, const std::vector<int>& m, int i, uint32_t stage) {
    const int k = static_cast<int>(m.size());
    const int left = m[(i - 1 + k) % k];
    std::vector<Posted> recvs;
    for (int s = 0; s < k - 1; ++s) {
      const Range rb = ring_block(r, k, (i - s - 1 + 2 * k) % k);
      for (uint32_t g = 0, S = segments(rb.len); g < S; ++g) {
        const Range sg = segment(rb, S, g);
        recvs.push_back(post(Xfer{left, buf + sg.off, sg.len, key(stage, s, g)}, true));
      }
    }
    return recvs;
  }
  void ring_gather(uint32_t* buf, Range r, const std::vector<int>& m, int i, uint32_t stage,
                   const std::vector<Posted>& recvs) {
    const int k = static_cast<int>(m.size());
    const int right = m[(i + 1) % k];
    auto seg_xf = [&](const Range& blk_r, uint32_t S, uint32_t g, uint32_t s) {
      const Range sg = segment(blk_r, S, g);
      return Xfer{right, buf + sg.off, sg.len, key(stage, s, g)};
    };
    std::vector<Posted> sends;
    const Range mine = ring_block(r, k, i);
    for (uint32_t g = 0, S = segments(mine.len); g < S; ++g) sends.push_back(post(seg_xf(mine, S, g, 0), false));
    size_t n = 0;
    for (int s = 0; s < k - 1; ++s) {
      const Range rb = ring_block(r, k, (i - s - 1 + 2 * k) % k);
      for (uint32_t g = 0, S = segments(rb.len); g < S; ++g, ++n) {
        wait(recvs[n]);
        if (s + 1 < k - 1) sends.push_back(post(seg_xf(rb, S, g, s + 1), false));
      }
    }
    for (const Posted& p : sends) wait(p);
  }
  static Range ring_block(Range r, int k, int j) {
    return Range{split(r.off, r.len, k, j), split(r.off, r.len, k, j + 1) - split(r.off, r.len, k, j)};
  }

  // All-reduce of `r` among `m` by a double binary tree: each half of the
  // range is reduced up one binary tree and broadcast down it; the second
  // tree mirrors the first, so that the leaves of one are inner nodes of
  // the other. The two trees run at once.
  void dbt_all_reduce(float* buf, Range r, const std::vector<int>& m, int i, uint32_t stage) {
    const int k = static_cast<int>(m.size());
    if (k == 1) return;
    std::exception_ptr err[2];
    auto tree = [&](int t) {
      try {
        const Range h{split(r.off, r.len, 2, t), split(r.off, r.len, 2, t + 1) - split(r.off, r.len, 2, t)};
        auto pos_of = [&](int idx) { return t == 0 ? idx : k - 1 - idx; };
        auto member = [&](int pos) { return m[t == 0 ? pos : k - 1 - pos]; };
        const int pos = pos_of(i);
        Scratch<float> tmp(h.len);
        for (int c = 2 * pos + 1; c <= 2 * pos + 2 && c < k; ++c) {
          step({}, {{member(c), tmp.data(), h.len, key(stage, 4 * t)}});
          reduce_into(buf + h.off, tmp.data(), h.len);
        }
        if (pos != 0) {
          const int parent = member((pos - 1) / 2);
          step({{parent, buf + h.off, h.len, key(stage, 4 * t)}}, {});
          step({}, {{parent, buf + h.off, h.len, key(stage, 4 * t + 1)}});
        }
        std::vector<Xfer> down;
        for (int c = 2 * pos + 1; c <= 2 * pos + 2 && c < k; ++c) down.push_back({member(c), buf + h.off, h.len, key(stage, 4 * t + 1)});
        step(down, {});
      } catch (...) {
        err[t] = std::current_exception();
        env_.fabric.abort(cat("rank ", env_.fabric.rank(), ": a tree of ", spec_.name, " failed"));
      }
    };
    std::thread other(tree, 1);
    tree(0);
    other.join();
    for (auto& e : err)
      if (e) std::rethrow_exception(e);
  }

 private:
  RunEnv& env_;
  const CollSpec& spec_;
  uint32_t chunk_;
  int64_t begin_ = -1, end_ = -1;
  bool issued_ = false;

 public:
  const std::vector<int>& group_;
  int me_;
};

// The dimensions a collective runs over, in order, with each dimension's
// members (this rank's line along it) and this rank's index there.
struct Stage {
  size_t dim;
  std::vector<int> members;
  int index;
};

std::vector<Stage> stages_of(const Topology& topo, int rank, const std::vector<bool>& involved);

// A communicator group is one flat stage over its members, with dimension
// 0's implementation; otherwise the involved dimensions.
std::vector<Stage> stages_for(const Topology& topo, int rank, const CollSpec& spec) {
  if (spec.members.empty()) return stages_of(topo, rank, spec.involved);
  if (spec.members.size() == 1) return {};
  const int index = static_cast<int>(std::find(spec.members.begin(), spec.members.end(), rank) - spec.members.begin());
  return {Stage{0, spec.members, index}};
}

std::vector<Stage> stages_of(const Topology& topo, int rank, const std::vector<bool>& involved) {
  std::vector<Stage> out;
  int stride = 1;
  for (size_t d = 0; d < topo.dims.size(); ++d) {
    const int k = topo.dims[d];
    const bool in = involved.empty() || d >= involved.size() || involved[d];
    if (in && k > 1) {
      Stage s{d, {}, (rank / stride) % k};
      for (int j = 0; j < k; ++j) s.members.push_back(rank + (j - s.index) * stride);
      out.push_back(std::move(s));
    }
    stride *= k;
  }
  return out;
}

CollResult run_chunk(RunEnv& env, const CollSpec& spec, uint32_t c, uint64_t elems_total, uint32_t chunks,
                     const std::vector<int>& group, int me) {
  const uint64_t E = split(0, elems_total, chunks, c + 1) - split(0, elems_total, chunks, c);
  const int G = static_cast<int>(group.size());
  const int rank = env.fabric.rank();
  const uint32_t seq = spec.pattern_seq();
  ChunkRun run(env, spec, c, group, me);
  const std::vector<Stage> stages = stages_for(env.topology, rank, spec);
  const SystemConfig& sys = env.system;
  CollResult res;
  res.group = G;
  auto flat_algo = [&](const std::vector<Algo>& v) { return sys.algo(v, stages.empty() ? 0 : stages[0].dim); };

  switch (spec.type) {
    case CollType::AllReduce:
    case CollType::ReduceScatter:
    case CollType::ReduceScatterBlock: {
      const bool ar = spec.type == CollType::AllReduce;
      Scratch<float> buf(E);
      std::vector<std::pair<Range, bool>> done;  // each stage's range, and whether it was a tree all-reduce
      Range r{0, E};
      uint32_t st = 0;
      // One ring dimension: the all-gather's receives go first (see ring_gather_recvs).
      const bool early = ar && stages.size() == 1 && stages[0].members.size() > 1 &&
                         sys.algo(sys.all_reduce, stages[0].dim) == Algo::Ring;
      std::vector<ChunkRun::Posted> gather_recvs;
      if (early)
        gather_recvs = run.ring_gather_recvs(reinterpret_cast<uint32_t*>(buf.data()), r, stages[0].members,
                                             stages[0].index, 1);
      // A first ring stage posts its receives before this rank fills its
      // buffer: they land in staging slots, never in buf.
      ChunkRun::RingRecvs first;
      const bool rs_early = !stages.empty() && stages[0].members.size() > 1 &&
                            sys.algo(ar ? sys.all_reduce : sys.reduce_scatter, stages[0].dim) == Algo::Ring;
      if (rs_early) run.ring_rs_recvs(first, r, stages[0].members, stages[0].index, 0);
      fill_f(buf.data(), E, rank, seq, c);
      for (const Stage& s : stages) {
        const Algo a = sys.algo(ar ? sys.all_reduce : sys.reduce_scatter, s.dim);
        if (ar && a == Algo::DoubleBinaryTree) {
          run.dbt_all_reduce(buf.data(), r, s.members, s.index, st++);
          done.push_back({r, true});
        } else {
          done.push_back({r, false});
          const bool pre = rs_early && st == 0;
          r = run.reduce_scatter(buf.data(), r, s.members, s.index, a, st++, pre ? &first : nullptr);
        }
      }
      if (early) {
        run.ring_gather(reinterpret_cast<uint32_t*>(buf.data()), done[0].first, stages[0].members, stages[0].index,
                        st++, gather_recvs);
        r = Range{0, E};
      } else if (ar) {
        for (size_t n = stages.size(); n-- > 0;) {
          if (done[n].second) continue;
          const Stage& s = stages[n];
          run.all_gather(reinterpret_cast<uint32_t*>(buf.data()), done[n].first, s.members, s.index,
                         sys.algo(sys.all_reduce, s.dim), st++);
        }
        r = Range{0, E};
      }
      run.end_comm();
      res.wrong += wrong_sum(buf.data(), r.off, r.len, group, seq, c);
      res.elements = r.len;
      break;
    }
    case CollType::AllGather: {
      Scratch<uint32_t> buf(E * G);
      // One ring dimension: every receive is posted before this rank fills
      // its own block (they land in the other blocks).
      const bool one_ring = stages.size() == 1 && sys.algo(sys.all_gather, stages[0].dim) == Algo::Ring;
      std::vector<ChunkRun::Posted> recvs;
      if (one_ring) recvs = run.ring_gather_recvs(buf.data(), Range{0, E * G}, stages[0].members, stages[0].index, 0);
      fill_u(buf.data() + me * E, E, rank, seq, c, 0);
      if (one_ring) {
        run.ring_gather(buf.data(), Range{0, E * G}, stages[0].members, stages[0].index, 0, recvs);
      } else {
        // Before the stage of dimension d this rank holds the blocks whose
        // group coordinates match its own from d on: contiguous, since the
        // group order has dimension 0 fastest.
        uint64_t stride = 1;  // blocks held
        uint32_t st = 0;
        for (const Stage& s : stages) {
          const int k = static_cast<int>(s.members.size());
          const uint64_t base = (me / (stride * k)) * (stride * k);
          run.all_gather(buf.data(), Range{base * E, stride * k * E}, s.members, s.index,
                         sys.algo(sys.all_gather, s.dim), st++);
          stride *= k;
        }
      }
      run.end_comm();
      // Every block this rank received; its own it wrote itself and only sent.
      for (int j = 0; j < G; ++j)
        if (j != me) res.wrong += wrong_u(buf.data() + j * E, E, group[j], seq, c, 0);
      res.elements = E * (G - 1);
      break;
    }
    case CollType::AllToAll: {
      const uint64_t P = (E + G - 1) / G;  // elements per destination
      Scratch<uint32_t> in(P * G), out(P * G);
      fill_u(in.data(), P * G, rank, seq, c, 0);
      std::memcpy(out.data() + me * P, in.data() + me * P, P * 4);
      const Algo a = flat_algo(sys.all_to_all);
      std::vector<Xfer> sends, recvs;
      for (int s = 1; s < G; ++s) {
        const int to = (me + s) % G, from = (me - s + G) % G;
        Xfer snd{group[to], in.data() + to * P, P, run.key(0, 0)};
        Xfer rcv{group[from], out.data() + from * P, P, run.key(0, 0)};
        if (a == Algo::Ring) {  // one peer pair at a time, in ring order
          run.step({snd}, {rcv});
        } else {
          sends.push_back(snd);
          recvs.push_back(rcv);
        }
      }
      if (!sends.empty()) run.step(sends, recvs);
      run.end_comm();
      for (int j = 0; j < G; ++j) res.wrong += wrong_u(out.data() + j * P, P, group[j], seq, c, me * P);
      res.elements = P * G;
      break;
    }
    case CollType::Broadcast:
    case CollType::Scatter: {
      const bool scatter = spec.type == CollType::Scatter;
      Scratch<uint32_t> buf(scatter ? E * G : E);
      if (me == 0)
        fill_u(buf.data(), buf.size(), group[0], seq, c, 0);
      const Algo a = flat_algo(sys.all_reduce);
      if (scatter || a == Algo::Direct) {
        std::vector<Xfer> sends, recvs;
        if (me == 0) {
          for (int j = 1; j < G; ++j) sends.push_back({group[j], buf.data() + (scatter ? j * E : 0), E, run.key(0, 0)});
        } else {
          recvs.push_back({group[0], buf.data() + (scatter ? me * E : 0), E, run.key(0, 0)});
        }
        run.step(sends, recvs);
      } else if (a == Algo::Ring) {  // a chain
        if (me > 0) run.step({}, {{group[me - 1], buf.data(), E, run.key(0, 0)}});
        if (me < G - 1) run.step({{group[me + 1], buf.data(), E, run.key(0, 0)}}, {});
      } else {  // a binomial tree
        uint32_t s = 0;
        for (int mask = 1; mask < G; mask *= 2, ++s) {
          if (me < mask && me + mask < G) run.step({{group[me + mask], buf.data(), E, run.key(0, s)}}, {});
          else if (me >= mask && me < 2 * mask) run.step({}, {{group[me - mask], buf.data(), E, run.key(0, s)}});
        }
      }
      run.end_comm();
      const uint64_t off = scatter ? me * E : 0;
      res.wrong += wrong_u(buf.data() + off, E, group[0], seq, c, off);
      res.elements = E;
      break;
    }
    case CollType::Reduce:
    case CollType::Gather: {
      const bool gather = spec.type == CollType::Gather;
      const Algo a = flat_algo(sys.all_reduce);
      if (gather) {
        Scratch<uint32_t> buf(E * G);
        fill_u(buf.data() + me * E, E, rank, seq, c, 0);
        std::vector<Xfer> sends, recvs;
        if (me == 0)
          for (int j = 1; j < G; ++j) recvs.push_back({group[j], buf.data() + j * E, E, run.key(0, 0)});
        else
          sends.push_back({group[0], buf.data() + me * E, E, run.key(0, 0)});
        run.step(sends, recvs);
        run.end_comm();
        if (me == 0) {
          for (int j = 0; j < G; ++j)
            res.wrong += wrong_u(buf.data() + j * E, E, group[j], seq, c, 0);
          res.elements = E * G;
        }
        break;
      }
      Scratch<float> buf(E), tmp(E);
      fill_f(buf.data(), E, rank, seq, c);
      if (a == Algo::Direct) {
        if (me == 0) {
          Scratch<float> all(E * (G - 1));
          std::vector<Xfer> recvs;
          for (int j = 1; j < G; ++j) recvs.push_back({group[j], all.data() + (j - 1) * E, E, run.key(0, 0)});
          run.step({}, recvs);
          for (int j = 0; j < G - 1; ++j) reduce_into(buf.data(), all.data() + j * E, E);
        } else {
          run.step({{group[0], buf.data(), E, run.key(0, 0)}}, {});
        }
      } else if (a == Algo::Ring) {  // a chain towards member 0
        if (me < G - 1) {
          run.step({}, {{group[me + 1], tmp.data(), E, run.key(0, 0)}});
          reduce_into(buf.data(), tmp.data(), E);
        }
        if (me > 0) run.step({{group[me - 1], buf.data(), E, run.key(0, 0)}}, {});
      } else {  // a binomial tree
        uint32_t s = 0;
        for (int mask = 1; mask < G; mask *= 2, ++s) {
          if (me & mask) {
            run.step({{group[me - mask], buf.data(), E, run.key(0, s)}}, {});
            break;
          }
          if (me + mask < G) {
            run.step({}, {{group[me + mask], tmp.data(), E, run.key(0, s)}});
            reduce_into(buf.data(), tmp.data(), E);
          }
        }
      }
      run.end_comm();
      if (me == 0) {
        res.wrong += wrong_sum(buf.data(), 0, E, group, seq, c);
        res.elements = E;
      }
      break;
    }
    case CollType::Barrier: {
      uint32_t s = 0;  // dissemination: log2(G) rounds of empty messages
      for (int d = 1; d < G; d *= 2, ++s)
        run.step({{group[(me + d) % G], nullptr, 0, run.key(0, s)}}, {{group[(me - d + G) % G], nullptr, 0, run.key(0, s)}});
      run.end_comm();
      break;
    }
  }
  run.end_comm();
  if (run.span().first >= 0) res.spans.push_back(run.span());
  return res;
}

// The length of the union of spans.
int64_t covered(std::vector<std::pair<int64_t, int64_t>> v) {
  std::sort(v.begin(), v.end());
  int64_t total = 0, reach = INT64_MIN;
  for (const auto& [b, e] : v) {
    if (e <= reach) continue;
    total += e - std::max(b, reach);
    reach = e;
  }
  return total;
}

// A custom implementation (SystemConfig::custom): this rank's trace of the
// algorithm, run as written. Its sends and receives start as soon as their
// dependencies are done, all in flight at once; each message is a pattern
// of (sender, collective, tag, occurrence of the tag) checked word for word
// where it lands; a compute node is the algorithm's reduction: the
// messages of the receives it depends on are added (float32) into the
// rank's accumulator. Trace dependencies were checked at load
// (validate_trace, validate_custom).
CollResult run_custom(RunEnv& env, const CollSpec& spec) {
  const Trace& t = *spec.custom;
  const int rank = env.fabric.rank();
  const size_t n = t.nodes.size();
  std::unordered_map<uint64_t, size_t> pos;
  for (size_t i = 0; i < n; ++i) pos.emplace(t.nodes[i].id, i);
  std::vector<size_t> indeg(n);
  std::vector<std::vector<size_t>> users(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<size_t> deps;
    for (const auto* list : {&t.nodes[i].data_deps, &t.nodes[i].ctrl_deps})
      for (uint64_t d : *list) deps.push_back(pos.at(d));
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    indeg[i] = deps.size();
    for (size_t d : deps) users[d].push_back(i);
  }
  // Messages with one tag between two ranks match in file order.
  std::vector<uint32_t> occurrence(n);
  std::map<std::tuple<int, int64_t, int64_t>, uint32_t> seen;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = t.nodes[i];
    if (node.type == NodeType::CommSend)
      occurrence[i] = seen[{0, node.attr_int("comm_dst", 0), node.attr_int("comm_tag", 0)}]++;
    if (node.type == NodeType::CommRecv)
      occurrence[i] = seen[{1, node.attr_int("comm_src", 0), node.attr_int("comm_tag", 0)}]++;
  }
  const uint32_t seq = spec.pattern_seq() ^ 0x40000000u;
  auto chunk_of = [&](size_t i) {
    return (static_cast<uint64_t>(t.nodes[i].attr_int("comm_tag", 0)) << 32) | occurrence[i];
  };
  std::vector<std::vector<uint32_t>> bufs(n);
  std::vector<float> acc;
  std::vector<Fabric::OpPtr> ops;
  std::vector<size_t> op_node;
  std::vector<size_t> ready;
  for (size_t i = n; i-- > 0;)
    if (!indeg[i]) ready.push_back(i);  // popped from the back: file order
  CollResult res;
  res.group = env.fabric.size();
  const int64_t begin = env.timeline.now_ns();
  size_t done = 0;
  bool issued = false;
  auto complete = [&](size_t i) {
    const Node& node = t.nodes[i];
    if (node.type == NodeType::CommRecv) {
      const int peer = static_cast<int>(node.attr_int("comm_src", 0));
      res.wrong += wrong_u(bufs[i].data(), bufs[i].size(), peer, seq, chunk_of(i), 0);
      res.elements += bufs[i].size();
    }
    if (node.type == NodeType::CommSend) std::vector<uint32_t>().swap(bufs[i]);
    ++done;
    for (size_t u = users[i].size(); u-- > 0;)
      if (--indeg[users[i][u]] == 0) ready.push_back(users[i][u]);
  };
  auto what = [&](size_t k) {
    const Node& node = t.nodes[op_node[k]];
    const bool recv = node.type == NodeType::CommRecv;
    return cat(recv ? "a receive from rank " : "a send to rank ", node.attr_int(recv ? "comm_src" : "comm_dst", 0),
               " tag ", node.attr_int("comm_tag", 0), " in ", coll_type_name(spec.type), " #", spec.seq, " (",
               spec.name, ", custom implementation ", t.path, ": ", node.label(), ")");
  };
  while (done < n) {
    while (!ready.empty()) {
      const size_t i = ready.back();
      ready.pop_back();
      const Node& node = t.nodes[i];
      if (node.type != NodeType::CommSend && node.type != NodeType::CommRecv) {
        if (node.type == NodeType::Comp) {  // the reduction of the receives it depends on
          for (uint64_t d : node.data_deps) {
            const std::vector<uint32_t>& in = bufs[pos.at(d)];
            if (t.nodes[pos.at(d)].type != NodeType::CommRecv || in.empty()) continue;
            if (acc.size() < in.size()) acc.resize(in.size());
            reduce_into(acc.data(), reinterpret_cast<const float*>(in.data()), in.size());
          }
        }
        complete(i);
        continue;
      }
      const bool send = node.type == NodeType::CommSend;
      const int peer = static_cast<int>(node.attr_int(send ? "comm_dst" : "comm_src", 0));
      const int64_t tag = node.attr_int("comm_tag", 0);
      bufs[i].resize((static_cast<uint64_t>(node.attr_int("comm_size", 0)) + 3) / 4);
      if (send) fill_u(bufs[i].data(), bufs[i].size(), rank, seq, chunk_of(i), 0);
      const uint64_t key = coll_key(spec.comm, spec.seq, occurrence[i], 63, static_cast<uint32_t>(tag & 0xffff),
                                    static_cast<uint32_t>(tag >> 16));
      ops.push_back(send ? env.fabric.isend(peer, key, bufs[i].data(), bufs[i].size() * 4, cat(t.path, ": ", node.label()))
                         : env.fabric.irecv(peer, key, bufs[i].data(), bufs[i].size() * 4));
      op_node.push_back(i);
    }
    if (!issued) {
      issued = true;
      if (env.issued) env.issued();
    }
    if (done == n) break;
    const size_t k = env.fabric.wait_any(ops, what);
    const size_t i = op_node[k];
    ops.erase(ops.begin() + static_cast<long>(k));
    op_node.erase(op_node.begin() + static_cast<long>(k));
    complete(i);
  }
  const int64_t end = env.timeline.now_ns();
  res.comm_ns = end - begin;
  res.spans.emplace_back(begin, end);
  return res;
}

}  // namespace

uint64_t coll_key(uint32_t comm, uint32_t seq, uint32_t chunk, uint32_t stage, uint32_t step, uint32_t segment) {
  return (1ull << 62) | (static_cast<uint64_t>(comm & 0xff) << 54) | (static_cast<uint64_t>(seq & 0xfff) << 42) |
         (static_cast<uint64_t>(chunk & 0xfff) << 30) | (static_cast<uint64_t>(stage & 0x3f) << 24) |
         (static_cast<uint64_t>(step & 0xffff) << 8) | (segment & 0xff);
}

uint64_t p2p_key(uint32_t tag, uint32_t occurrence) {
  return (2ull << 62) | (static_cast<uint64_t>(tag) << 20) | (occurrence & 0xfffff);
}

std::string describe_key(uint64_t key) {
  if (key >> 62 == 2) return cat("tag ", (key >> 20) & 0xffffffffull, " (message ", (key & 0xfffff) + 1, " with that tag)");
  const uint64_t comm = (key >> 54) & 0xff;
  return cat(comm ? cat("communicator group #", comm, " ") : std::string(), "collective #", (key >> 42) & 0xfff,
             " chunk ", (key >> 30) & 0xfff, " stage ", (key >> 24) & 0x3f, " step ", (key >> 8) & 0xffff, " segment ",
             key & 0xff);
}

void fill_p2p(std::vector<uint32_t>& buf, int src, uint32_t tag, uint32_t occurrence) {
  fill_u(buf.data(), buf.size(), src, 0x80000000u | tag, occurrence, 0);
}

uint64_t check_p2p(const std::vector<uint32_t>& buf, int src, uint32_t tag, uint32_t occurrence) {
  return wrong_u(buf.data(), buf.size(), src, 0x80000000u | tag, occurrence, 0);
}

std::vector<int> collective_group(const Topology& topo, int rank, const CollSpec& spec) {
  if (!spec.members.empty()) return spec.members;
  const std::vector<bool>& involved = spec.involved;
  std::vector<int> group{rank};
  // Built from dimension 0 outwards, so that dimension 0 varies fastest.
  for (const Stage& s : stages_of(topo, rank, involved)) {
    std::vector<int> next;
    for (int j = 0; j < static_cast<int>(s.members.size()); ++j)
      for (int g : group) next.push_back(g + s.members[j] - rank);
    group = std::move(next);
  }
  return group;
}

double bus_factor(CollType t, int n) {
  if (n <= 1) return 1.0;
  switch (t) {
    case CollType::AllReduce: return 2.0 * (n - 1) / n;
    case CollType::AllGather:
    case CollType::ReduceScatter:
    case CollType::ReduceScatterBlock:
    case CollType::AllToAll: return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

std::vector<uint64_t> collective_buffers(const SystemConfig& sys, const Topology& topo, int rank,
                                         const CollSpec& spec) {
  // Mirrors the Scratch buffers of run_chunk and ChunkRun, for the largest
  // chunk (a smaller one fits in its buffer).
  if (spec.custom) return {};  // its buffers are the messages it names, made as it runs
  const std::vector<int> group = collective_group(topo, rank, spec);
  const uint64_t G = group.size();
  const uint64_t me = std::find(group.begin(), group.end(), rank) - group.begin();
  const uint64_t elems = (spec.bytes + 3) / 4;
  const uint64_t chunks = std::max<uint64_t>(1, std::min<uint64_t>(sys.chunks, elems));
  const uint64_t active = std::max<uint64_t>(1, std::min<uint64_t>(chunks, sys.active_chunks));
  const uint64_t E = (elems + chunks - 1) / chunks;
  const std::vector<Stage> stages = stages_for(topo, rank, spec);
  const Algo flat = sys.algo(sys.all_reduce, stages.empty() ? 0 : stages[0].dim);
  std::vector<uint64_t> one;  // elements of each buffer of one chunk
  switch (spec.type) {
    case CollType::AllReduce:
    case CollType::ReduceScatter:
    case CollType::ReduceScatterBlock: {
      const bool ar = spec.type == CollType::AllReduce;
      one.push_back(E);
      Range r{0, E};
      for (const Stage& s : stages) {
        const int k = static_cast<int>(s.members.size()), i = s.index;
        auto part = [&](int j) { return split(r.off, r.len, k, j + 1) - split(r.off, r.len, k, j); };
        const Algo a = sys.algo(ar ? sys.all_reduce : sys.reduce_scatter, s.dim);
        if (ar && a == Algo::DoubleBinaryTree) {  // each tree a buffer of its half
          one.push_back(split(0, r.len, 2, 1));
          one.push_back(r.len - split(0, r.len, 2, 1));
          continue;
        }
        if (a == Algo::Direct) {
          one.push_back(part(i) * (k - 1));
        } else if (a == Algo::HalvingDoubling && pow2(k)) {  // the first step's half is the largest
          const int mid = k / 2;
          one.push_back(i < mid ? split(r.off, r.len, k, mid) - split(r.off, r.len, k, 0)
                                : split(r.off, r.len, k, k) - split(r.off, r.len, k, mid));
        } else {
          uint64_t slot = 0;
          for (int j = 0; j < k; ++j) slot = std::max(slot, part(j));
          one.push_back(slot * (k - 1));
        }
        r = Range{split(r.off, r.len, k, i), part(i)};
      }
      break;
    }
    case CollType::AllGather: one.push_back(E * G); break;
    case CollType::AllToAll: one.insert(one.end(), 2, (E + G - 1) / G * G); break;
    case CollType::Broadcast: one.push_back(E); break;
    case CollType::Scatter:
    case CollType::Gather: one.push_back(E * G); break;
    case CollType::Reduce:
      one.insert(one.end(), 2, E);
      if (flat == Algo::Direct && me == 0) one.push_back(E * (G - 1));
      break;
    case CollType::Barrier: break;
  }
  std::vector<uint64_t> out;
  for (uint64_t c = 0; c < active; ++c)
    for (uint64_t n : one)
      if (n > 0) out.push_back(n * 4);
  return out;
}

CollResult run_collective(RunEnv& env, const CollSpec& spec) {
  if (spec.custom) return run_custom(env, spec);
  const int rank = env.fabric.rank();
  const std::vector<int> group = collective_group(env.topology, rank, spec);
  const int me = static_cast<int>(std::find(group.begin(), group.end(), rank) - group.begin());
  const uint64_t elems = (spec.bytes + 3) / 4;
  const uint32_t chunks = static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(env.system.chunks, elems)));
  const uint32_t active = std::min<uint32_t>(chunks, static_cast<uint32_t>(env.system.active_chunks));
  CollResult total;
  total.group = static_cast<int>(group.size());
  if (active <= 1) {
    for (uint32_t c = 0; c < chunks; ++c) {
      const CollResult r = run_chunk(env, spec, c, elems, chunks, group, me);
      total.wrong += r.wrong;
      total.elements += r.elements;
      total.spans.insert(total.spans.end(), r.spans.begin(), r.spans.end());
    }
    total.comm_ns = covered(total.spans);
    return total;
  }
  std::atomic<uint32_t> next{0};
  std::atomic<uint64_t> wrong{0}, verified{0};
  std::vector<std::exception_ptr> errs(active);
  std::mutex spans_mu;
  std::vector<std::thread> workers;
  for (uint32_t w = 0; w < active; ++w)
    workers.emplace_back([&, w] {
      try {
        for (uint32_t c; (c = next++) < chunks;) {
          const CollResult r = run_chunk(env, spec, c, elems, chunks, group, me);
          wrong += r.wrong;
          verified += r.elements;
          std::lock_guard<std::mutex> lk(spans_mu);
          total.spans.insert(total.spans.end(), r.spans.begin(), r.spans.end());
        }
      } catch (...) {
        errs[w] = std::current_exception();
        env.fabric.abort(cat("rank ", rank, ": a chunk of ", spec.name, " failed"));
      }
    });
  for (auto& t : workers) t.join();
  // The first failure that is not the abort it caused in the others.
  std::exception_ptr first;
  for (auto& e : errs) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      if (err.code() != GENIE_ERR_CANCELLED || !first) first = e;
      if (err.code() != GENIE_ERR_CANCELLED) break;
    } catch (...) {
      first = e;
      break;
    }
  }
  if (first) std::rethrow_exception(first);
  total.wrong = wrong;
  total.elements = verified;
  total.comm_ns = covered(total.spans);
  return total;
}

}  // namespace genie::replay
