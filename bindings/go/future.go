package genie

import (
	"runtime"
	"time"

	"genie.dev/genie/internal/capi"
)

// Future is the result of a graph submission: it completes once, holding
// the outputs (which stay on the device that produced them until read).
type Future struct{ h handle }

// Submit runs g on the context with each graph input bound to the tensor
// of the same name (every input bound once; dtypes and shapes must match).
// The graph is snapshotted: it may change or be closed afterwards. The call
// does not wait for execution: wait on the future. Input tensors must not
// be written until the future completes.
func (c *Context) Submit(g *Graph, inputs map[string]*Tensor) (*Future, error) {
	names := make([]string, 0, len(inputs))
	tensors := make([]*Tensor, 0, len(inputs))
	for name, t := range inputs {
		names = append(names, name)
		tensors = append(tensors, t)
	}
	return c.SubmitNamed(g, names, tensors)
}

// SubmitNamed is Submit with the bindings as two parallel slices: input
// names[i] is bound to tensors[i].
func (c *Context) SubmitNamed(g *Graph, names []string, tensors []*Tensor) (*Future, error) {
	const op = "genie_graph_submit"
	var f uintptr
	err := c.withBindings(op, g, names, tensors, func(cp, gp uintptr, joined string, ptrs []uintptr) int {
		return capi.Genie_graph_submit(cp, gp, joined, ptrs, int64(len(ptrs)), &f)
	})
	if err != nil {
		return nil, err
	}
	fut := &Future{h: handle{p: f, kind: "future"}}
	runtime.SetFinalizer(fut, (*Future).Close)
	return fut, nil
}

// withBindings holds the context, the graph (exclusively) and every bound
// tensor open while fn calls the library with their handles: the names
// joined for the SWIG layer and one tensor handle per name.
func (c *Context) withBindings(op string, g *Graph, names []string, tensors []*Tensor,
	fn func(cp, gp uintptr, joined string, ptrs []uintptr) int) error {
	if len(names) != len(tensors) {
		return errorf(StatusInvalidArgument, op, "%d input names but %d tensors", len(names), len(tensors))
	}
	if err := checkNames(op, names...); err != nil {
		return err
	}
	cp, err := c.h.acquire(op)
	if err != nil {
		return err
	}
	defer c.h.mu.RUnlock()
	gp, err := g.h.acquireExclusive(op)
	if err != nil {
		return err
	}
	defer g.h.mu.Unlock()
	// Hold every tensor open for the call (each distinct tensor once).
	ptrs := make([]uintptr, len(tensors))
	held := make([]*Tensor, 0, len(tensors))
	defer func() {
		for _, t := range held {
			t.h.mu.RUnlock()
		}
	}()
	for i, t := range tensors {
		if t == nil {
			return errorf(StatusInvalidHandle, op, "input %q is bound to a nil tensor", names[i])
		}
		seen := false
		for _, h := range held {
			if h == t {
				seen = true
				break
			}
		}
		if seen {
			ptrs[i] = t.h.p
			continue
		}
		p, err := t.h.acquire(op)
		if err != nil {
			return errorf(StatusInvalidHandle, op, "input %q is bound to a closed tensor", names[i])
		}
		held = append(held, t)
		ptrs[i] = p
	}
	joined := joinNames(names)
	return call(op, func() int { return fn(cp, gp, joined, ptrs) })
}

// Close destroys the future; a graph still running finishes in the
// background and its outputs are released. Output tensors already taken
// stay valid. Closing twice does nothing.
func (f *Future) Close() error {
	runtime.SetFinalizer(f, nil)
	f.h.close(func(p uintptr) { capi.Genie_future_destroy(p) })
	return nil
}

// Wait blocks until the future completes and returns its execution error
// (nil on success).
func (f *Future) Wait() error { return f.WaitTimeout(-1) }

// WaitTimeout is Wait for at most d (negative: no limit); ErrTimeout if the
// graph is still running (the future stays valid).
func (f *Future) WaitTimeout(d time.Duration) error {
	const op = "genie_future_wait"
	p, err := f.h.acquire(op)
	if err != nil {
		return err
	}
	defer f.h.mu.RUnlock()
	ms := int64(-1)
	if d >= 0 {
		ms = d.Milliseconds()
	}
	return call(op, func() int { return capi.Genie_future_wait(p, ms) })
}

// Poll reports whether the future has completed, and its execution error
// if it has. It never blocks.
func (f *Future) Poll() (done bool, err error) {
	const op = "genie_future_poll"
	p, err := f.h.acquire(op)
	if err != nil {
		return false, err
	}
	defer f.h.mu.RUnlock()
	var st int
	err = call(op, func() int { st = capi.Genie_future_poll(p); return st })
	return st != int(StatusInProgress), err
}

// NumOutputs is the number of outputs (in the order they were marked).
func (f *Future) NumOutputs() (int, error) {
	const op = "genie_future_num_outputs"
	p, err := f.h.acquire(op)
	if err != nil {
		return 0, err
	}
	defer f.h.mu.RUnlock()
	var n uint64
	err = call(op, func() int { return capi.Genie_future_num_outputs(p, &n) })
	return int(n), err
}

// Output returns a new tensor handle for output index of the completed
// future (Wait first); close it when done.
func (f *Future) Output(index int) (*Tensor, error) {
	const op = "genie_future_output"
	if index < 0 {
		return nil, errorf(StatusNotFound, op, "negative output index %d", index)
	}
	p, err := f.h.acquire(op)
	if err != nil {
		return nil, err
	}
	defer f.h.mu.RUnlock()
	var t uintptr
	if err := call(op, func() int { return capi.Genie_future_output(p, int64(index), &t) }); err != nil {
		return nil, err
	}
	return newTensor(t), nil
}

// OutputByName is Output selecting the output by its value name.
func (f *Future) OutputByName(name string) (*Tensor, error) {
	const op = "genie_future_output_by_name"
	if err := checkNames(op, name); err != nil {
		return nil, err
	}
	p, err := f.h.acquire(op)
	if err != nil {
		return nil, err
	}
	defer f.h.mu.RUnlock()
	var t uintptr
	if err := call(op, func() int { return capi.Genie_future_output_by_name(p, name, &t) }); err != nil {
		return nil, err
	}
	return newTensor(t), nil
}

// ExecTime is the wall-clock execution time of the completed graph.
func (f *Future) ExecTime() (time.Duration, error) {
	const op = "genie_future_exec_ns"
	p, err := f.h.acquire(op)
	if err != nil {
		return 0, err
	}
	defer f.h.mu.RUnlock()
	var ns uint64
	err = call(op, func() int { return capi.Genie_future_exec_ns(p, &ns) })
	return time.Duration(ns), err
}
