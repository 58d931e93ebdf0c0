// A rank's report travels to the launcher as JSON; the launcher prints the
// ASTRA-sim line per rank, a table like nccl-tests' and a summary, and
// writes the --json report and the --trace (Chrome/Perfetto) file.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "executor.hpp"

namespace genie::replay {

std::string report_to_json(const RankReport& r);
// Throws Error(PROTOCOL) when `json` is not a rank report.
RankReport report_from_json(const std::string& json);

struct RunInfo {
  std::string workload;
  std::string transport;
  int ranks = 0;
  double wall_s = 0;
};

// Prints the per-rank lines and the collective table to `out`; returns
// the total of wrong elements.
uint64_t print_reports(std::FILE* out, const std::vector<RankReport>& reports, const RunInfo& info);

// The --json report: the run, every rank, every collective.
std::string summary_json(const std::vector<RankReport>& reports, const RunInfo& info);

// The Chrome trace-event JSON of every rank's events (pid = rank).
std::string chrome_trace(const std::vector<RankReport>& reports);

}  // namespace genie::replay
