// Why the CUDA backend is unavailable, in an operator's words: the reasons
// both the plugin's front (shim/entry.cpp) and the backend (entry.cpp) give.
#pragma once

namespace genie::cuda {

inline constexpr const char* kNoDeviceReason =
    "no CUDA-capable device (the driver sees none, or CUDA_VISIBLE_DEVICES hides all)";

}  // namespace genie::cuda
