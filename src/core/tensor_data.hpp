// Host tensor storage: dtype, shape and a 64-byte aligned buffer.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <memory>

#include "core/dtype.hpp"
#include "core/shape.hpp"

namespace genie {

class TensorData {
 public:
  // Allocates zero-filled storage; throws Error(OUT_OF_MEMORY / TOO_LARGE).
  TensorData(DType dtype, Shape shape);
  // Adopts `data` (at least byte_size(shape) bytes, 64-byte aligned, contents
  // as they are) and hands it to `release` when destroyed, instead of free():
  // for buffers owned by a pool, or borrowed from another tensor (`release`
  // then keeps that tensor alive). `counted`: whether the bytes count in
  // tensor_bytes_live (false for borrowed storage, counted by its owner).
  using Release = std::function<void(std::byte*)>;
  TensorData(DType dtype, Shape shape, std::byte* data, Release release, bool counted);
  ~TensorData();
  TensorData(const TensorData&) = delete;
  TensorData& operator=(const TensorData&) = delete;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return nbytes_; }
  std::byte* bytes() { return data_.get(); }
  const std::byte* bytes() const { return data_.get(); }
  template <class T>
  T* data() {
    return reinterpret_cast<T*>(data_.get());
  }
  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(data_.get());
  }

 private:
  struct Deleter {
    Release release;  // empty: std::free
    void operator()(std::byte* p) const {
      if (release)
        release(p);
      else
        std::free(p);
    }
  };
  void count_live();
  DType dtype_;
  Shape shape_;
  int64_t numel_;
  size_t nbytes_;
  size_t counted_ = 0;  // bytes this tensor added to tensor_bytes_live
  std::unique_ptr<std::byte[], Deleter> data_;
};

using TensorPtr = std::shared_ptr<TensorData>;

// Bytes held by every TensorData of the process, and the most held at once
// since the last reset_peak (memory accounting for tests and metrics).
size_t tensor_bytes_live();
size_t tensor_bytes_peak();
void tensor_bytes_reset_peak();

// Converts any tensor to a new tensor of `to` (f16/bf16 via f32; float to int
// truncates toward zero; anything to bool is != 0).
TensorPtr convert(const TensorData& src, DType to);

}  // namespace genie
