package genie

import (
	"unsafe"

	"genie.dev/genie/internal/capi"
)

// ONNXModel is an ONNX model imported into a graph (docs/onnx.md): the
// graph, whose inputs are the model's inputs followed by its weights, and
// the weights as tensors resident on the device they were uploaded to.
type ONNXModel struct {
	Graph *Graph
	// Weights maps each weight input of Graph to its tensor.
	Weights map[string]*Tensor
	// Inputs are the model's own inputs (bound at Submit), in order.
	Inputs []string
}

// ImportONNX imports the bytes of a .onnx file (genie_graph_import_onnx),
// uploading its initializers to device ("" for the context's default: host
// memory embedded, the server remote). A node Genie cannot map fails with
// ErrUnsupported naming it. Close the model to release graph and weights.
func (c *Context) ImportONNX(model []byte, device string) (*ONNXModel, error) {
	const op = "genie_graph_import_onnx"
	if err := checkNames(op, device); err != nil {
		return nil, err
	}
	p, err := c.h.acquire(op)
	if err != nil {
		return nil, err
	}
	defer c.h.mu.RUnlock()
	var gp, arr uintptr
	var n uint64
	if err := call(op, func() int {
		return capi.Genie_graph_import_onnx(p, model, device, &gp, &arr, &n)
	}); err != nil {
		return nil, err
	}
	handles := make([]uintptr, n)
	if n > 0 {
		capi.Genie_go_copy(unsafe.Slice((*byte)(unsafe.Pointer(&handles[0])), int(n)*int(unsafe.Sizeof(uintptr(0)))), arr)
		capi.Genie_free(arr)
	}
	// Wrapped before anything can fail, so that a failure releases them all.
	g := newGraph(gp)
	tensors := make([]*Tensor, n)
	for i, h := range handles {
		tensors[i] = newTensor(h)
	}
	names, err := g.Inputs()
	if err == nil && len(names) < len(tensors) {
		err = &Error{Code: StatusInternal, Op: op, Detail: "the graph has fewer inputs than weights"}
	}
	if err != nil {
		for _, t := range tensors {
			t.Close()
		}
		g.Close()
		return nil, err
	}
	first := len(names) - len(tensors)
	m := &ONNXModel{Graph: g, Weights: make(map[string]*Tensor, n), Inputs: names[:first]}
	for i, t := range tensors {
		m.Weights[names[first+i]] = t
	}
	return m, nil
}

// Submit runs the model with its weights bound and inputs binding the
// model's own inputs by name.
func (m *ONNXModel) Submit(c *Context, inputs map[string]*Tensor) (*Future, error) {
	all := make(map[string]*Tensor, len(inputs)+len(m.Weights))
	for k, v := range m.Weights {
		all[k] = v
	}
	for k, v := range inputs {
		all[k] = v
	}
	return c.Submit(m.Graph, all)
}

// Close releases the graph and the weight tensors. Closing twice does
// nothing.
func (m *ONNXModel) Close() error {
	for _, t := range m.Weights {
		t.Close()
	}
	return m.Graph.Close()
}

// LoadOpLibrary loads a vendor's op library (genie_op_library_load): a
// shared object exporting genie_op_library_init, which registers custom
// ops for this process; graphs then use them by name. Loading it twice
// does nothing. docs/custom-ops.md.
func LoadOpLibrary(path string) error {
	const op = "genie_op_library_load"
	if err := checkNames(op, path); err != nil {
		return err
	}
	return call(op, func() int { return capi.Genie_op_library_load(path) })
}

// OpRegistered reports whether custom op name is registered in this process.
func OpRegistered(name string) bool {
	if checkNames("genie_op_is_registered", name) != nil {
		return false
	}
	return capi.Genie_op_is_registered(name) == 1
}
