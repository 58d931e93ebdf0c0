// Tensor storage: dtype, shape and a Buffer (core/buffer.hpp) that says
// where the bytes live (host, pinned host or device memory of one device)
// and who frees them.
#pragma once

#include <cstddef>
#include <memory>

#include "core/buffer.hpp"
#include "core/dtype.hpp"
#include "core/shape.hpp"

namespace genie {

class TensorData {
 public:
  // Allocates zeroed host storage (Buffer::host_zeroed: large tensors are
  // not cleared byte by byte, the kernel's fresh pages are zero); throws
  // Error(OUT_OF_MEMORY / TOO_LARGE).
  //
  // The rule: storage that anyone may read before its owner writes all of
  // it (a tensor a client allocates, then reads) is zeroed, since heap memory
  // may hold bytes another tensor, of another session, left there. Storage
  // whose every byte is written before anyone reads it (constants filled
  // from JSON or ONNX, kernel outputs from the BufferPool) is Uninitialized.
  TensorData(DType dtype, Shape shape);
  struct Uninitialized {};
  // Host storage with undefined contents: the caller writes every byte
  // before anyone may read it. Throws as above.
  TensorData(DType dtype, Shape shape, Uninitialized);
  // Adopts `buffer` (at least byte_size(shape) bytes, contents as they are):
  // for buffers of a pool or a device backend, or views borrowing another
  // tensor's bytes (the buffer's Release then keeps that tensor alive).
  // `counted`: whether the bytes count in tensor_bytes_live (false for
  // borrowed storage, counted by its owner). Throws Error(INVALID_ARGUMENT)
  // for an invalid dtype or a buffer smaller than the tensor.
  TensorData(DType dtype, Shape shape, Buffer buffer, bool counted);
  ~TensorData();
  TensorData(const TensorData&) = delete;
  TensorData& operator=(const TensorData&) = delete;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return nbytes_; }
  // The storage: where it lives and who frees it.
  const Buffer& buffer() const { return buffer_; }
  Buffer& buffer() { return buffer_; }
  MemoryKind memory() const { return buffer_.memory(); }
  const Device& device() const { return buffer_.device(); }
  bool host_accessible() const { return buffer_.host_accessible(); }
  // The first byte. Host code may dereference it only when host_accessible();
  // device memory is reached through its device's backend.
  std::byte* bytes() { return buffer_.data(); }
  const std::byte* bytes() const { return buffer_.data(); }
  template <class T>
  T* data() {
    return reinterpret_cast<T*>(buffer_.data());
  }
  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(buffer_.data());
  }

 private:
  void count_live();
  DType dtype_;
  Shape shape_;
  int64_t numel_;
  size_t nbytes_;
  size_t counted_ = 0;  // bytes this tensor added to tensor_bytes_live
  Buffer buffer_;
};

using TensorPtr = std::shared_ptr<TensorData>;

// Bytes held by every TensorData of the process, and the most held at once
// since the last reset_peak (memory accounting for tests and metrics).
size_t tensor_bytes_live();
size_t tensor_bytes_peak();
void tensor_bytes_reset_peak();

// Converts any host tensor to a new host tensor of `to` (f16/bf16 via f32;
// float to int truncates toward zero; anything to bool is != 0).
TensorPtr convert(const TensorData& src, DType to);
// The same into `dst` (same shape, any dtype), both host-accessible.
void convert_into(const TensorData& src, TensorData& dst);
// The element loop of both: `n` elements at `src` (of `from`) into `dst` (of
// `to`), host memory. Also what device backends on host-reachable memory
// convert with (exec/backend.hpp, BackendHost).
void convert_elements(const std::byte* src, DType from, std::byte* dst, DType to, int64_t n);

}  // namespace genie
