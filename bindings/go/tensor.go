package genie

import (
	"runtime"
	"unsafe"

	"genie.dev/genie/internal/capi"
)

// Tensor is a tensor resident on a device (host memory, a GPU, or a
// server's device in remote mode) until closed.
type Tensor struct{ h handle }

func newTensor(p uintptr) *Tensor {
	t := &Tensor{h: handle{p: p, kind: "tensor"}}
	runtime.SetFinalizer(t, (*Tensor).Close)
	return t
}

// Alloc allocates a zero-filled tensor of dtype and shape on device: "cpu",
// "gpu:N", "remote:N" ... or "" for the context's default device (host
// memory embedded, the server remote).
func (c *Context) Alloc(dtype DType, shape []int64, device string) (*Tensor, error) {
	const op = "genie_tensor_alloc"
	if err := checkNames(op, device); err != nil {
		return nil, err
	}
	p, err := c.h.acquire(op)
	if err != nil {
		return nil, err
	}
	defer c.h.mu.RUnlock()
	var t uintptr
	if err := call(op, func() int {
		return capi.Genie_tensor_alloc(p, capi.Enum_SS_genie_dtype(dtype), shape, device, &t)
	}); err != nil {
		return nil, err
	}
	return newTensor(t), nil
}

// TensorFromBytes allocates a tensor and fills it with data, which must be
// exactly its size (ErrSizeMismatch otherwise).
func (c *Context) TensorFromBytes(dtype DType, shape []int64, data []byte, device string) (*Tensor, error) {
	t, err := c.Alloc(dtype, shape, device)
	if err != nil {
		return nil, err
	}
	if err := t.CopyFrom(data); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// TensorFromFloat32 allocates an f32 tensor holding data (len(data) must be
// the number of elements of shape).
func (c *Context) TensorFromFloat32(shape []int64, data []float32, device string) (*Tensor, error) {
	return c.TensorFromBytes(F32, shape, float32Bytes(data), device)
}

// float32Bytes views a []float32 as bytes, without a copy.
func float32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}

// Close destroys the tensor and frees its memory on its device (graphs
// already submitted with it keep their own reference). Closing twice does
// nothing.
func (t *Tensor) Close() error {
	runtime.SetFinalizer(t, nil)
	t.h.close(func(p uintptr) { capi.Genie_tensor_destroy(p) })
	return nil
}

// TensorInfo describes a tensor.
type TensorInfo struct {
	DType  DType
	Shape  []int64
	Nbytes int
}

// Info returns the tensor's dtype, shape and byte size.
func (t *Tensor) Info() (TensorInfo, error) {
	const op = "genie_tensor_info"
	p, err := t.h.acquire(op)
	if err != nil {
		return TensorInfo{}, err
	}
	defer t.h.mu.RUnlock()
	var dtype int32
	var ndim, nbytes uint64
	shape := make([]int64, MaxDims)
	if err := call(op, func() int { return capi.Genie_tensor_info(p, &dtype, shape, &ndim, &nbytes) }); err != nil {
		return TensorInfo{}, err
	}
	return TensorInfo{DType: DType(dtype), Shape: shape[:ndim], Nbytes: int(nbytes)}, nil
}

// Device is the tensor's canonical device string ("cpu:0", "remote:0" ...),
// "" for a closed tensor.
func (t *Tensor) Device() string {
	p, err := t.h.acquire("genie_tensor_device")
	if err != nil {
		return ""
	}
	defer t.h.mu.RUnlock()
	return capi.Genie_tensor_device(p)
}

// SetSemantics annotates the tensor with what it is: its phase, role and
// layer (-1 unknown). Its writes and reads to a server carry this semantic
// tag; PhaseUnknown, RoleUnspecified and -1 clear it. Values outside their
// enumeration are ErrInvalidArgument and change nothing.
func (t *Tensor) SetSemantics(phase Phase, role Role, layer int) error {
	const op = "genie_tensor_set_semantics"
	if layer < -1 || layer > 65534 {
		return errorf(StatusInvalidArgument, op, "layer %d is outside -1..65534", layer)
	}
	p, err := t.h.acquire(op)
	if err != nil {
		return err
	}
	defer t.h.mu.RUnlock()
	return call(op, func() int {
		return capi.Genie_tensor_set_semantics(p, capi.Enum_SS_genie_phase(phase),
			capi.Enum_SS_genie_tensor_role(role), int(layer))
	})
}

// Semantics returns the tensor's annotation (SetSemantics): PhaseUnknown,
// RoleUnspecified and -1 while it has none.
func (t *Tensor) Semantics() (Phase, Role, int, error) {
	const op = "genie_tensor_get_semantics"
	p, err := t.h.acquire(op)
	if err != nil {
		return PhaseUnknown, RoleUnspecified, -1, err
	}
	defer t.h.mu.RUnlock()
	var phase, role, layer int32
	if err := call(op, func() int { return capi.Genie_tensor_get_semantics(p, &phase, &role, &layer) }); err != nil {
		return PhaseUnknown, RoleUnspecified, -1, err
	}
	return Phase(phase), Role(role), int(layer), nil
}

// Write copies src into the tensor starting at byte offset
// (ErrSizeMismatch if it runs past the end).
func (t *Tensor) Write(offset int, src []byte) error {
	const op = "genie_tensor_write"
	if offset < 0 {
		return errorf(StatusInvalidArgument, op, "negative offset %d", offset)
	}
	p, err := t.h.acquire(op)
	if err != nil {
		return err
	}
	defer t.h.mu.RUnlock()
	return call(op, func() int { return capi.Genie_tensor_write(p, int64(offset), src) })
}

// Read copies len(dst) bytes of the tensor starting at byte offset into dst
// (ErrSizeMismatch if it runs past the end).
func (t *Tensor) Read(offset int, dst []byte) error {
	const op = "genie_tensor_read"
	if offset < 0 {
		return errorf(StatusInvalidArgument, op, "negative offset %d", offset)
	}
	p, err := t.h.acquire(op)
	if err != nil {
		return err
	}
	defer t.h.mu.RUnlock()
	return call(op, func() int { return capi.Genie_tensor_read(p, int64(offset), dst) })
}

// CopyFrom fills the whole tensor from data, which must be exactly its
// byte size (ErrSizeMismatch otherwise).
func (t *Tensor) CopyFrom(data []byte) error {
	info, err := t.Info()
	if err != nil {
		return err
	}
	if len(data) != info.Nbytes {
		return errorf(StatusSizeMismatch, "genie_tensor_write",
			"the buffer has %d bytes, the %s tensor %v needs %d", len(data), info.DType, info.Shape, info.Nbytes)
	}
	return t.Write(0, data)
}

// Bytes returns a copy of the tensor's bytes (for a server tensor, this is
// when they cross the network).
func (t *Tensor) Bytes() ([]byte, error) {
	info, err := t.Info()
	if err != nil {
		return nil, err
	}
	b := make([]byte, info.Nbytes)
	if err := t.Read(0, b); err != nil {
		return nil, err
	}
	return b, nil
}

// CopyFromFloat32 fills an f32 tensor from data (ErrDtypeMismatch for
// another dtype, ErrSizeMismatch unless len(data) is its element count).
func (t *Tensor) CopyFromFloat32(data []float32) error {
	if err := t.expectDType(F32, "genie_tensor_write"); err != nil {
		return err
	}
	return t.CopyFrom(float32Bytes(data))
}

// Float32s returns the values of an f32 tensor (ErrDtypeMismatch for
// another dtype).
func (t *Tensor) Float32s() ([]float32, error) {
	info, err := t.Info()
	if err != nil {
		return nil, err
	}
	if info.DType != F32 {
		return nil, errorf(StatusDtypeMismatch, "genie_tensor_read", "the tensor holds %s, not f32", info.DType)
	}
	f := make([]float32, info.Nbytes/4)
	if err := t.Read(0, float32Bytes(f)); err != nil {
		return nil, err
	}
	return f, nil
}

func (t *Tensor) expectDType(want DType, op string) error {
	info, err := t.Info()
	if err != nil {
		return err
	}
	if info.DType != want {
		return errorf(StatusDtypeMismatch, op, "the tensor holds %s, not %s", info.DType, want)
	}
	return nil
}
