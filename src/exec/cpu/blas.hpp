// The BLAS (OpenBLAS), loaded when the first matrix product needs it.
//
// Why not linked: OpenBLAS starts its worker threads (one per CPU but one)
// as it is loaded, and each spins for about 0.1 s before it sleeps. Linked,
// every process using Genie paid that at start, a cost that grows with the
// machine's cores: remote-mode clients, which never multiply on the CPU,
// and servers whose graphs run on GPUs, with a thread per core they did not
// need (docs/benchmarks.md, "What starting Genie costs a process"). Loaded
// on first use, the library is the same one (its SONAME, found when Genie
// was built), and a process that links it itself shares its copy.
#pragma once

#include <cblas.h>

namespace genie::cpu {

using SgemmFn = decltype(&cblas_sgemm);

// cblas_sgemm of the BLAS, loading it on the first call (thread-safe).
// Throws Error(UNSUPPORTED) naming the library when it cannot be loaded.
SgemmFn blas_sgemm();

// Whether this process has the BLAS loaded (through Genie or otherwise).
bool blas_loaded();

}  // namespace genie::cpu
