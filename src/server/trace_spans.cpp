#include "server/trace_spans.hpp"

#include "core/trace.hpp"
#include "exec/run_trace.hpp"
#include "server/impl.hpp"

namespace genie {

void Server::Impl::want_spans(Peer& p, uint64_t rid) {
  if (p.traced.size() < kMaxTracedInFlight) p.traced.insert(rid);
}

void add_trace_spans(const Graph& g, const ExecResult& r, wire::GraphDone& d) {
  size_t dropped = 0, bytes = 0;
  std::vector<RunSpan> spans = run_spans(g, r, "server", trace::now_ns(), kMaxTraceSpans, &dropped);
  for (size_t i = 0; i < spans.size(); ++i) {
    RunSpan& s = spans[i];
    wire::TraceSpan* w = d.add_spans();
    w->set_name(std::move(s.event.name));
    w->set_cat(std::move(s.event.cat));
    w->set_track(static_cast<uint32_t>(s.event.tid));
    w->set_track_name(std::move(s.row));
    w->set_start_ns(s.start_ns);
    w->set_dur_ns(s.dur_ns);
    for (auto& [k, v] : s.event.args) {
      wire::TraceArg* a = w->add_args();
      a->set_key(k);
      a->set_text(std::move(v));
    }
    for (const auto& [k, v] : s.event.num_args) {
      wire::TraceArg* a = w->add_args();
      a->set_key(k);
      a->set_number(v);
    }
    bytes += w->ByteSizeLong();
    if (bytes > kMaxTraceSpanBytes) {
      d.mutable_spans()->RemoveLast();
      dropped += spans.size() - i;
      break;
    }
  }
  d.set_spans_dropped(static_cast<uint32_t>(dropped));
}

void add_trace_spans(const Graph& g, const MultiResult& r, wire::GraphDone& d) {
  ExecResult run;
  run.status = r.status;
  run.detail = r.detail;
  run.exec_ns = r.exec_ns;
  add_trace_spans(g, run, d);
}

}  // namespace genie
