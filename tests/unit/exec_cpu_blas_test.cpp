// The BLAS is loaded by the first matrix product, not with the library
// (exec/cpu/blas.hpp). This test's executable links the exec layer and not
// the BLAS, as a program using Genie does.
#include <gtest/gtest.h>

#include "exec/cpu/blas.hpp"
#include "exec/cpu/kernel_util.hpp"
#include "process_testing.hpp"

namespace genie::cpu {
namespace {

bool blas_mapped() { return testing::library_mapped("libopenblas"); }

TEST(CpuBlas, IsLoadedByTheFirstMatrixProduct) {
  ASSERT_FALSE(blas_mapped()) << "the BLAS was loaded before any product (run this test on its own)";
  EXPECT_FALSE(blas_loaded());

  // An empty product needs no BLAS.
  float c0[2] = {3.f, 4.f};
  gemm(false, false, 1, 2, 0, 1.f, nullptr, 1, nullptr, 2, 0.f, c0, 2);
  EXPECT_FLOAT_EQ(c0[0], 0.f);
  EXPECT_FALSE(blas_mapped());

  // [1 2; 3 4] x [5 6; 7 8] = [19 22; 43 50]
  const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  float c[4] = {};
  gemm(false, false, 2, 2, 2, 1.f, a, 2, b, 2, 0.f, c, 2);
  EXPECT_FLOAT_EQ(c[0], 19.f);
  EXPECT_FLOAT_EQ(c[1], 22.f);
  EXPECT_FLOAT_EQ(c[2], 43.f);
  EXPECT_FLOAT_EQ(c[3], 50.f);
  EXPECT_TRUE(blas_mapped());
  EXPECT_TRUE(blas_loaded());
  EXPECT_EQ(blas_sgemm(), blas_sgemm());
}

}  // namespace
}  // namespace genie::cpu
