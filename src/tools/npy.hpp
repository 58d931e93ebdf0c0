// A strict reader of NumPy .npy files (format versions 1, 2 and 3).
//
// Accepted: C-order arrays of little-endian float32 (<f4), float16 (<f2),
// int32 (<i4), int64 (<i8) and bool (|b1), rank 0..GENIE_MAX_DIMS, with
// exactly the data bytes the header promises. Everything else (Fortran
// order, big-endian, float64, object arrays, truncated or padded data) is
// refused with a message saying what to change. bfloat16 has no .npy
// dtype, so a bf16 input cannot be read from a file.
#pragma once

#include <genie.h>

#include <cstdint>
#include <string>
#include <vector>

namespace genie_cli {

struct NpyArray {
  genie_dtype_t dtype = GENIE_DTYPE_INVALID;
  std::vector<int64_t> shape;
  std::string data;  // the raw element bytes, C order
};

// Parses the bytes of a .npy file. Throws CliError (failure) with a message
// starting with `source` (the file name).
NpyArray parse_npy(const std::string& bytes, const std::string& source);

// The .npy descr of a Genie dtype ("<f4" ...), for messages.
const char* npy_descr(genie_dtype_t dtype);

}  // namespace genie_cli
