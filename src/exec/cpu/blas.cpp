#include "exec/cpu/blas.hpp"

#include <dlfcn.h>

#include <string>

#include "core/error.hpp"

// GENIE_BLAS_SONAME: set by CMakeLists.txt, from the library it found.

namespace genie::cpu {

namespace {

struct Loaded {
  SgemmFn sgemm = nullptr;
  std::string error;  // why it could not be loaded
};

Loaded load() {
  Loaded l;
  // RTLD_LOCAL: its symbols stay out of the process's global scope, where
  // another BLAS (numpy's, say) may be.
  void* h = ::dlopen(GENIE_BLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = ::dlerror();
    l.error = e ? e : "dlopen failed";
    return l;
  }
  l.sgemm = reinterpret_cast<SgemmFn>(::dlsym(h, "cblas_sgemm"));
  if (l.sgemm == nullptr) l.error = "it has no cblas_sgemm";
  return l;  // never closed: kernels may run until the process exits
}

}  // namespace

SgemmFn blas_sgemm() {
  static const Loaded loaded = load();
  check(loaded.sgemm != nullptr, GENIE_ERR_UNSUPPORTED, "matrix products on the CPU need the BLAS (",
        GENIE_BLAS_SONAME, "), which could not be loaded: ", loaded.error);
  return loaded.sgemm;
}

bool blas_loaded() {
  void* h = ::dlopen(GENIE_BLAS_SONAME, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return false;
  ::dlclose(h);  // NOLOAD took a reference
  return true;
}

}  // namespace genie::cpu
