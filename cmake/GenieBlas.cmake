# GENIE_BLAS_SONAME: the name the dynamic loader knows the BLAS by (its
# SONAME), as a link would record it. Genie does not link the BLAS: it loads
# it by this name when the first matrix product needs it
# (src/exec/cpu/blas.hpp). Needs pkg_check_modules(OPENBLAS ...) first;
# shared by the library's build and the fuzz harnesses' (fuzz/).
set(GENIE_BLAS_SONAME libopenblas.so.0)  # where objdump cannot tell
find_library(GENIE_BLAS_FILE NAMES openblas HINTS ${OPENBLAS_LIBRARY_DIRS} NO_CACHE)
if(GENIE_BLAS_FILE AND CMAKE_OBJDUMP)
  execute_process(COMMAND ${CMAKE_OBJDUMP} -p ${GENIE_BLAS_FILE} OUTPUT_VARIABLE blas_dynamic ERROR_QUIET)
  if(blas_dynamic MATCHES "SONAME +([A-Za-z0-9._+-]+)")
    set(GENIE_BLAS_SONAME ${CMAKE_MATCH_1})
  endif()
endif()
