// Device profiles measured once and kept on disk: the options every device
// backend's calibration takes (exec/backend.hpp), and a small JSON file per
// device model holding the measured rates, so that later starts read them
// instead of measuring again. The measuring itself belongs to the backends:
// the scheduler never touches hardware.
#pragma once

#include <string>

namespace genie::sched {

struct CalibrateOptions {
  std::string node_id;           // DeviceProfile::node_id of the result
  std::string cache_dir;         // "" = $XDG_CACHE_HOME/genie, else $HOME/.cache/genie
  bool use_cache = true;         // false: always measure, never read or write the file
  double budget_fraction = 0.8;  // mem_budget_bytes = fraction x available memory
};

// What a device model is: the file's key. Two devices with the same
// identity share one file.
struct DeviceIdentity {
  std::string kind;    // "cpu", "cuda": the file name's prefix
  std::string model;   // "Intel(R) Xeon(R) ...", "NVIDIA H100 80GB HBM3"
  unsigned units = 0;  // cores, streaming multiprocessors
};

// The measured rates (each > 0 when read back).
struct MeasuredRates {
  double peak_flops = 0;
  double vector_flops = 0;
  double mem_bw_bytes_per_s = 0;
};

// The cache directory `opts` names ("" when no directory can be found).
std::string profile_cache_dir(const CalibrateOptions& opts);
// The file for `id` in `dir` ("" when dir is "").
std::string profile_cache_file(const std::string& dir, const DeviceIdentity& id);
// Reads `file`: false when it is missing, damaged, of another format
// version, of another identity, or holds a non-positive rate.
bool read_profile_cache(const std::string& file, const DeviceIdentity& id, MeasuredRates* out);
// Writes `file` (creating `dir`), atomically: written aside and renamed.
// Failures are ignored (the rates are measured again next time).
void write_profile_cache(const std::string& dir, const std::string& file, const DeviceIdentity& id,
                         const MeasuredRates& rates);

// The whole of `file` in *out: false when it cannot be read.
bool read_text_file(const std::string& file, std::string* out);
// Writes `text` to `file`, creating its directory, atomically: written aside
// and renamed, so that a concurrent reader never sees half a file. False
// (and nothing left behind) when it cannot.
bool write_text_file(const std::string& file, const std::string& text);

}  // namespace genie::sched
