package genie_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"genie.dev/genie"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// expectErr checks that err is a *genie.Error with the sentinel's code, a
// non-empty detail containing want, and that errors.Is/As see it.
func expectErr(t *testing.T, err error, sentinel *genie.Error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected %v, got nil", sentinel.Code)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("errors.Is(%v, %v) is false", err, sentinel.Code)
	}
	var gerr *genie.Error
	if !errors.As(err, &gerr) {
		t.Fatalf("errors.As(%v, *genie.Error) is false", err)
	}
	if gerr.Code != sentinel.Code || gerr.Detail == "" {
		t.Fatalf("error %#v: want code %v and a detail", gerr, sentinel.Code)
	}
	if !strings.Contains(gerr.Detail, want) {
		t.Fatalf("detail %q does not mention %q", gerr.Detail, want)
	}
	if !strings.Contains(err.Error(), sentinel.Code.String()) {
		t.Fatalf("message %q does not name %v", err.Error(), sentinel.Code)
	}
}

func newContext(t *testing.T, opts *genie.Options) *genie.Context {
	t.Helper()
	if opts == nil {
		opts = &genie.Options{IgnoreEnv: true}
	}
	ctx, err := genie.Init(opts)
	must(t, err)
	t.Cleanup(func() { ctx.Close() })
	return ctx
}

// buildMLP: z = relu(x @ w^T + b), x [2,3], w [4,3] inputs, b [4] constant.
func buildMLP(t *testing.T) *genie.Graph {
	t.Helper()
	g, err := genie.NewGraph("mlp")
	must(t, err)
	t.Cleanup(func() { g.Close() })
	must(t, g.AddInput("x", genie.F32, []int64{2, 3}))
	must(t, g.AddInput("w", genie.F32, []int64{4, 3}))
	must(t, g.AddConstantFloat32("b", []int64{4}, []float32{0.5, -0.5, 1, -2}))
	must(t, g.AddNode("linear", "fc", []string{"x", "w", "b"}, []string{"y"}))
	must(t, g.AddNode("relu", "act", []string{"y"}, []string{"z"}))
	must(t, g.SetRole("w", genie.RoleWeight))
	must(t, g.SetRole("x", genie.RoleInput))
	must(t, g.SetPhase("fc", genie.PhaseForward))
	must(t, g.SetLayer("fc", 0))
	must(t, g.SetModule("fc", "mlp.fc"))
	must(t, g.SetModality("fc", genie.ModalityText))
	must(t, g.MarkOutput("z"))
	must(t, g.Validate())
	return g
}

var (
	mlpX = []float32{1, 2, 3, -1, 0.5, 2}
	mlpW = []float32{0.1, 0.2, 0.3, -0.4, 0.5, -0.6, 1, 0, -1, 0.25, 0.25, 0.25}
	mlpB = []float32{0.5, -0.5, 1, -2}
)

func mlpExpected() []float32 {
	out := make([]float32, 8)
	for i := 0; i < 2; i++ {
		for o := 0; o < 4; o++ {
			s := mlpB[o]
			for k := 0; k < 3; k++ {
				s += mlpX[i*3+k] * mlpW[o*3+k]
			}
			if s < 0 {
				s = 0
			}
			out[i*4+o] = s
		}
	}
	return out
}

func runMLP(t *testing.T, ctx *genie.Context, g *genie.Graph) []float32 {
	t.Helper()
	x, err := ctx.TensorFromFloat32([]int64{2, 3}, mlpX, "")
	must(t, err)
	defer x.Close()
	w, err := ctx.TensorFromFloat32([]int64{4, 3}, mlpW, "")
	must(t, err)
	defer w.Close()
	f, err := ctx.Submit(g, map[string]*genie.Tensor{"x": x, "w": w})
	must(t, err)
	defer f.Close()
	must(t, f.Wait())
	n, err := f.NumOutputs()
	must(t, err)
	if n != 1 {
		t.Fatalf("NumOutputs = %d, want 1", n)
	}
	z, err := f.OutputByName("z")
	must(t, err)
	defer z.Close()
	info, err := z.Info()
	must(t, err)
	if info.DType != genie.F32 || fmt.Sprint(info.Shape) != "[2 4]" || info.Nbytes != 32 {
		t.Fatalf("output info %+v", info)
	}
	vals, err := z.Float32s()
	must(t, err)
	return vals
}

func checkClose(t *testing.T, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d values, want %d", len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > 1e-5 {
			t.Fatalf("value %d: got %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
}

func TestVersion(t *testing.T) {
	if genie.Version() == "" || genie.ABIVersion() != 1 {
		t.Fatalf("version %q ABI %d", genie.Version(), genie.ABIVersion())
	}
	if genie.F32.String() != "f32" || genie.BF16.Size() != 2 || genie.I64.Size() != 8 {
		t.Fatal("dtype names or sizes")
	}
	if genie.StatusParse.String() != "GENIE_ERR_PARSE" {
		t.Fatalf("status name %q", genie.StatusParse.String())
	}
}

func TestMLPEmbedded(t *testing.T) {
	ctx := newContext(t, nil)
	if !ctx.IsEmbedded() || ctx.NodeID() == "" {
		t.Fatal("expected an embedded context with a node id")
	}
	if up, err := ctx.IsConnected(); err != nil || !up { // embedded: nothing to lose
		t.Fatalf("embedded context connected %v, %v", up, err)
	}
	g := buildMLP(t)
	checkClose(t, runMLP(t, ctx, g), mlpExpected())
}

func TestTensorRoundTrip(t *testing.T) {
	ctx := newContext(t, nil)
	tn, err := ctx.Alloc(genie.I32, []int64{2, 2}, "cpu")
	must(t, err)
	defer tn.Close()
	if tn.Device() != "cpu:0" {
		t.Fatalf("device %q", tn.Device())
	}
	zero, err := tn.Bytes()
	must(t, err)
	if len(zero) != 16 || strings.Trim(string(zero), "\x00") != "" {
		t.Fatalf("not zero-filled: %v", zero)
	}
	src := []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0}
	must(t, tn.CopyFrom(src))
	part := make([]byte, 8)
	must(t, tn.Read(4, part))
	if fmt.Sprint(part) != fmt.Sprint(src[4:12]) {
		t.Fatalf("partial read %v", part)
	}
	must(t, tn.Write(12, []byte{9, 0, 0, 0}))
	all, err := tn.Bytes()
	must(t, err)
	if all[12] != 9 {
		t.Fatalf("partial write not seen: %v", all)
	}
	f, err := ctx.TensorFromFloat32([]int64{3}, []float32{1.5, -2, 3.25}, "")
	must(t, err)
	defer f.Close()
	vals, err := f.Float32s()
	must(t, err)
	checkClose(t, vals, []float32{1.5, -2, 3.25})
	// A scalar: no dimensions (nil or empty), one element.
	for _, shape := range [][]int64{nil, {}} {
		s, err := ctx.TensorFromFloat32(shape, []float32{4.5}, "")
		must(t, err)
		info, err := s.Info()
		must(t, err)
		if len(info.Shape) != 0 || info.Nbytes != 4 {
			t.Fatalf("scalar info %+v", info)
		}
		v, err := s.Float32s()
		must(t, err)
		checkClose(t, v, []float32{4.5})
		must(t, s.Close())
	}
}

func TestGraphIntrospectionAndJSON(t *testing.T) {
	g := buildMLP(t)
	in, err := g.Inputs()
	must(t, err)
	out, err := g.Outputs()
	must(t, err)
	n, err := g.NumNodes()
	must(t, err)
	if fmt.Sprint(in) != "[x w]" || fmt.Sprint(out) != "[z]" || n != 2 {
		t.Fatalf("inputs %v outputs %v nodes %d", in, out, n)
	}
	nodes, err := g.Nodes()
	must(t, err)
	if fmt.Sprint(nodes) != "[{fc linear} {act relu}]" {
		t.Fatalf("nodes %v", nodes)
	}
	dt, shape, err := g.ValueInfo("y")
	must(t, err)
	if dt != genie.F32 || fmt.Sprint(shape) != "[2 4]" {
		t.Fatalf("y: %v %v", dt, shape)
	}
	js, err := g.JSON()
	must(t, err)
	if !strings.Contains(js, `"mlp.fc"`) {
		t.Fatalf("JSON lacks the module annotation: %s", js)
	}
	g2, err := genie.GraphFromJSON(js)
	must(t, err)
	defer g2.Close()
	h1, err := g.Hash()
	must(t, err)
	h2, err := g2.Hash()
	must(t, err)
	if h1 != h2 {
		t.Fatalf("hash changed through JSON: %x != %x", h1, h2)
	}
	js2, err := g2.JSON()
	must(t, err)
	if js != js2 {
		t.Fatal("JSON export of the import differs")
	}
	// The imported graph runs and gives the same result.
	checkClose(t, runMLP(t, newContext(t, nil), g2), mlpExpected())
}

func TestUnknownOp(t *testing.T) {
	g, err := genie.NewGraph("bad")
	must(t, err)
	defer g.Close()
	must(t, g.AddInput("a", genie.F32, []int64{2}))
	err = g.AddNode("frobnicate", "n", []string{"a"}, []string{"b"})
	expectErr(t, err, genie.ErrUnknownOp, "frobnicate")
	var gerr *genie.Error
	errors.As(err, &gerr)
	if gerr.Op != "genie_graph_add_node" {
		t.Fatalf("op %q", gerr.Op)
	}
	// A typo: the detail suggests the real name.
	expectErr(t, g.AddNode("matmull", "n", []string{"a", "a"}, []string{"b"}), genie.ErrUnknownOp, "matmul")
	// The graph is unchanged and still usable.
	must(t, g.AddNode("relu", "r", []string{"a"}, []string{"b"}))
}

func TestTensorSemantics(t *testing.T) {
	ctx := newContext(t, nil)
	x, err := ctx.Alloc(genie.F16, []int64{4}, "")
	must(t, err)
	defer x.Close()
	if p, r, l, err := x.Semantics(); err != nil || p != genie.PhaseUnknown || r != genie.RoleUnspecified || l != -1 {
		t.Fatalf("a new tensor is annotated: %v %v %v %v", p, r, l, err)
	}
	must(t, x.SetSemantics(genie.PhaseDecode, genie.RoleKVCache, 3))
	expectErr(t, x.SetSemantics(genie.Phase(99), genie.RoleWeight, 0), genie.ErrInvalidArgument, "genie_phase_t")
	expectErr(t, x.SetSemantics(genie.PhaseDecode, genie.Role(0x101), 0), genie.ErrInvalidArgument,
		"genie_tensor_role_t")
	expectErr(t, x.SetSemantics(genie.PhaseDecode, genie.RoleWeight, 65535), genie.ErrInvalidArgument, "65534")
	if p, r, l, err := x.Semantics(); err != nil || p != genie.PhaseDecode || r != genie.RoleKVCache || l != 3 {
		t.Fatalf("got %v %v %v %v, want decode kv_cache 3", p, r, l, err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := newContext(t, nil)
	g := buildMLP(t)

	// Wrong dtype: an i32 tensor bound to an f32 input.
	xi, err := ctx.Alloc(genie.I32, []int64{2, 3}, "")
	must(t, err)
	defer xi.Close()
	w, err := ctx.Alloc(genie.F32, []int64{4, 3}, "")
	must(t, err)
	defer w.Close()
	_, err = ctx.Submit(g, map[string]*genie.Tensor{"x": xi, "w": w})
	expectErr(t, err, genie.ErrDtypeMismatch, "x")
	// ... and read as float32 on the Go side.
	_, err = xi.Float32s()
	expectErr(t, err, genie.ErrDtypeMismatch, "i32")
	expectErr(t, xi.CopyFromFloat32(make([]float32, 6)), genie.ErrDtypeMismatch, "i32")

	// Wrong shape.
	ws, err := ctx.Alloc(genie.F32, []int64{3, 4}, "")
	must(t, err)
	defer ws.Close()
	x, err := ctx.Alloc(genie.F32, []int64{2, 3}, "")
	must(t, err)
	defer x.Close()
	_, err = ctx.Submit(g, map[string]*genie.Tensor{"x": x, "w": ws})
	expectErr(t, err, genie.ErrShapeMismatch, "w")

	// Unbound and unknown inputs.
	_, err = ctx.Submit(g, map[string]*genie.Tensor{"x": x})
	expectErr(t, err, genie.ErrInvalidGraph, "w")
	_, err = ctx.Submit(g, map[string]*genie.Tensor{"x": x, "w": w, "nope": x})
	expectErr(t, err, genie.ErrInvalidGraph, "nope")

	// Wrong size buffers: past the end (library), not the whole tensor (Go).
	expectErr(t, x.Write(0, make([]byte, 100)), genie.ErrSizeMismatch, "")
	expectErr(t, x.Read(20, make([]byte, 8)), genie.ErrSizeMismatch, "")
	expectErr(t, x.CopyFromFloat32(make([]float32, 5)), genie.ErrSizeMismatch, "20 bytes")
	_, err = ctx.TensorFromFloat32([]int64{2, 2}, []float32{1, 2, 3}, "")
	expectErr(t, err, genie.ErrSizeMismatch, "12 bytes")
	expectErr(t, g.AddConstant("c", genie.F32, []int64{4}, make([]byte, 3)), genie.ErrSizeMismatch, "")
	expectErr(t, x.Write(-1, []byte{0}), genie.ErrInvalidArgument, "negative")

	// Bad shapes, dtypes and devices.
	_, err = ctx.Alloc(genie.F32, []int64{2, -3}, "")
	expectErr(t, err, genie.ErrInvalidArgument, "")
	_, err = ctx.Alloc(genie.DType(99), []int64{2}, "")
	expectErr(t, err, genie.ErrInvalidArgument, "")
	_, err = ctx.Alloc(genie.F32, make([]int64, 9), "")
	expectErr(t, err, genie.ErrInvalidArgument, "")
	_, err = ctx.Alloc(genie.F32, []int64{2}, "warp:9")
	if err == nil {
		t.Fatal("device warp:9 accepted")
	}
	_, err = ctx.Alloc(genie.F32, []int64{2}, "remote:0")
	expectErr(t, err, genie.ErrUnsupported, "")

	// Names with a NUL byte never reach C.
	expectErr(t, g.AddInput("a\x00b", genie.F32, []int64{1}), genie.ErrInvalidArgument, "NUL")
	_, err = ctx.Submit(g, map[string]*genie.Tensor{"x\x00w": x})
	expectErr(t, err, genie.ErrInvalidArgument, "NUL")

	// Graph errors.
	bad, err := genie.NewGraph("")
	must(t, err)
	defer bad.Close()
	must(t, bad.AddInput("a", genie.F32, []int64{2}))
	expectErr(t, bad.AddInput("a", genie.F32, []int64{2}), genie.ErrInvalidGraph, "a")
	expectErr(t, bad.SetPhase("nope", genie.PhaseForward), genie.ErrNotFound, "nope")
	must(t, bad.AddNode("softmax", "s", []string{"a"}, []string{"b"}))
	expectErr(t, bad.SetAttrString("s", "axis", "x"), genie.ErrInvalidAttribute, "axis")
	expectErr(t, bad.Validate(), genie.ErrInvalidGraph, "")
	_, err = genie.GraphFromJSON(`{"format": "genie.graph", "version": 1, "inputs": [`)
	expectErr(t, err, genie.ErrParse, "")

	// Options are validated by the library.
	_, err = genie.Init(&genie.Options{IgnoreEnv: true, MasterPort: 70000})
	expectErr(t, err, genie.ErrInvalidArgument, "")
	_, err = genie.Init(&genie.Options{IgnoreEnv: true, NumThreads: -1})
	expectErr(t, err, genie.ErrInvalidArgument, "")
}

func TestClosedHandles(t *testing.T) {
	ctx := newContext(t, nil)
	g := buildMLP(t)
	x, err := ctx.TensorFromFloat32([]int64{2, 3}, mlpX, "")
	must(t, err)
	w, err := ctx.TensorFromFloat32([]int64{4, 3}, mlpW, "")
	must(t, err)
	defer w.Close()
	f, err := ctx.Submit(g, map[string]*genie.Tensor{"x": x, "w": w})
	must(t, err)

	// A tensor closed right after submission: the graph kept its own reference.
	must(t, x.Close())
	must(t, x.Close()) // twice is fine
	must(t, f.Wait())
	_, err = x.Bytes()
	expectErr(t, err, genie.ErrInvalidHandle, "closed")
	expectErr(t, x.Write(0, []byte{1}), genie.ErrInvalidHandle, "closed")
	_, err = ctx.Submit(g, map[string]*genie.Tensor{"x": x, "w": w})
	expectErr(t, err, genie.ErrInvalidHandle, "x")
	_, err = ctx.Submit(g, map[string]*genie.Tensor{"x": nil, "w": w})
	expectErr(t, err, genie.ErrInvalidHandle, "nil")

	z, err := f.Output(0)
	must(t, err)
	must(t, f.Close())
	vals, err := z.Float32s() // outputs outlive their future
	must(t, err)
	checkClose(t, vals, mlpExpected())
	must(t, z.Close())
	expectErr(t, f.Wait(), genie.ErrInvalidHandle, "future")
	_, err = f.Output(0)
	expectErr(t, err, genie.ErrInvalidHandle, "future")

	must(t, g.Close())
	expectErr(t, g.AddInput("q", genie.F32, []int64{1}), genie.ErrInvalidHandle, "graph")
	_, err = ctx.Submit(g, map[string]*genie.Tensor{"w": w})
	expectErr(t, err, genie.ErrInvalidHandle, "graph")

	// After the context is closed its tensors answer SHUTDOWN; Close still works.
	must(t, ctx.Close())
	_, err = w.Bytes()
	expectErr(t, err, genie.ErrShutdown, "")
	_, err = ctx.Alloc(genie.F32, []int64{1}, "")
	expectErr(t, err, genie.ErrInvalidHandle, "context")
	if ctx.IsEmbedded() || ctx.NodeID() != "" {
		t.Fatal("closed context still answers")
	}
}

func TestFutureErrors(t *testing.T) {
	ctx := newContext(t, nil)
	g := buildMLP(t)
	x, _ := ctx.TensorFromFloat32([]int64{2, 3}, mlpX, "")
	defer x.Close()
	w, _ := ctx.TensorFromFloat32([]int64{4, 3}, mlpW, "")
	defer w.Close()
	f, err := ctx.Submit(g, map[string]*genie.Tensor{"x": x, "w": w})
	must(t, err)
	defer f.Close()
	must(t, f.WaitTimeout(10*time.Second))
	done, err := f.Poll()
	if !done || err != nil {
		t.Fatalf("Poll after Wait: %v %v", done, err)
	}
	_, err = f.Output(1)
	expectErr(t, err, genie.ErrNotFound, "")
	_, err = f.OutputByName("y")
	expectErr(t, err, genie.ErrNotFound, "y")
	d, err := f.ExecTime()
	must(t, err)
	if d <= 0 {
		t.Fatalf("exec time %v", d)
	}
	// Integer division by zero fails at execution: the future reports it.
	gd, _ := genie.NewGraph("div")
	defer gd.Close()
	must(t, gd.AddInput("a", genie.I32, []int64{2}))
	must(t, gd.AddInput("b", genie.I32, []int64{2}))
	must(t, gd.AddNode("div", "d", []string{"a", "b"}, []string{"q"}))
	must(t, gd.MarkOutput("q"))
	a, _ := ctx.Alloc(genie.I32, []int64{2}, "")
	defer a.Close()
	fd, err := ctx.Submit(gd, map[string]*genie.Tensor{"a": a, "b": a})
	must(t, err)
	defer fd.Close()
	expectErr(t, fd.Wait(), genie.ErrInvalidArgument, "")
	_, err = fd.Output(0)
	expectErr(t, err, genie.ErrInvalidArgument, "")
}

// Error details are thread-local in C; goroutines migrate between threads.
// Each goroutine must see the detail of its own failure.
func TestConcurrentErrorDetails(t *testing.T) {
	g, err := genie.NewGraph("")
	must(t, err)
	defer g.Close()
	must(t, g.AddInput("a", genie.F32, []int64{1}))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				op := fmt.Sprintf("bogus_op_%d_%d", i, j)
				err := g.AddNode(op, "n", []string{"a"}, []string{"b"})
				var gerr *genie.Error
				if !errors.As(err, &gerr) || !strings.Contains(gerr.Detail, op) {
					errs <- fmt.Errorf("goroutine %d: %v does not name %s", i, err, op)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestConcurrentSubmit(t *testing.T) {
	ctx := newContext(t, nil)
	g := buildMLP(t)
	w, err := ctx.TensorFromFloat32([]int64{4, 3}, mlpW, "")
	must(t, err)
	defer w.Close()
	want := mlpExpected()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x, err := ctx.TensorFromFloat32([]int64{2, 3}, mlpX, "")
			if err != nil {
				errs <- err
				return
			}
			defer x.Close()
			for j := 0; j < 20; j++ {
				f, err := ctx.SubmitNamed(g, []string{"x", "w"}, []*genie.Tensor{x, w})
				if err != nil {
					errs <- err
					return
				}
				err = f.Wait()
				var z *genie.Tensor
				if err == nil {
					z, err = f.Output(0)
				}
				f.Close()
				if err != nil {
					errs <- err
					return
				}
				vals, err := z.Float32s()
				z.Close()
				if err != nil || math.Abs(float64(vals[5]-want[5])) > 1e-5 {
					errs <- fmt.Errorf("wrong result %v (%v)", vals, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Remote mode through a server in this process: the same graph gives the
// same result, and the outputs live on the server until read.
func TestRemote(t *testing.T) {
	srv, err := genie.NewServer(&genie.Options{IgnoreEnv: true}, "", 0)
	must(t, err)
	defer srv.Close()
	port, err := srv.Port()
	must(t, err)
	ctx := newContext(t, &genie.Options{IgnoreEnv: true, MasterAddr: "127.0.0.1", MasterPort: port,
		Timeout: 20 * time.Second})
	if ctx.IsEmbedded() {
		t.Fatal("context with a master address is embedded")
	}
	if up, err := ctx.IsConnected(); err != nil || !up {
		t.Fatalf("remote context connected %v, %v", up, err)
	}
	info, err := ctx.ServerInfo()
	must(t, err)
	if !strings.Contains(info, `"sessions"`) {
		t.Fatalf("server info %s", info)
	}
	lost, err := ctx.LostTensors()
	must(t, err)
	if !strings.Contains(lost, `"session":"connected"`) || !strings.Contains(lost, `"tensors":[]`) {
		t.Fatalf("lost tensors of a live session %s", lost)
	}
	g := buildMLP(t)
	checkClose(t, runMLP(t, ctx, g), mlpExpected())
	tn, err := ctx.Alloc(genie.F32, []int64{2}, "")
	must(t, err)
	defer tn.Close()
	if tn.Device() != "remote:0" {
		t.Fatalf("default remote device %q", tn.Device())
	}
	expectErr(t, tn.Write(0, make([]byte, 12)), genie.ErrSizeMismatch, "")

	// Embedded contexts have no server.
	_, err = newContext(t, nil).ServerInfo()
	expectErr(t, err, genie.ErrUnsupported, "")
	// Nobody listens on a closed server's port; the context sees it lost.
	must(t, srv.Close())
	deadline := time.Now().Add(10 * time.Second)
	for up, err := ctx.IsConnected(); up; up, err = ctx.IsConnected() {
		must(t, err)
		if time.Now().After(deadline) {
			t.Fatal("context still connected to a closed server")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err = genie.Init(&genie.Options{IgnoreEnv: true, MasterAddr: "127.0.0.1", MasterPort: port,
		Timeout: 2 * time.Second})
	if !errors.Is(err, genie.ErrConnection) && !errors.Is(err, genie.ErrTimeout) {
		t.Fatalf("connecting to a stopped server: %v", err)
	}
}

// A tensor that is never closed is released by its finalizer (a backstop
// only): the server's tensor count comes back down after a GC.
func TestFinalizerBackstop(t *testing.T) {
	srv, err := genie.NewServer(&genie.Options{IgnoreEnv: true}, "", 0)
	must(t, err)
	defer srv.Close()
	port, err := srv.Port()
	must(t, err)
	ctx := newContext(t, &genie.Options{IgnoreEnv: true, MasterAddr: "127.0.0.1", MasterPort: port,
		Timeout: 20 * time.Second})
	count := func() int {
		info, err := ctx.ServerInfo()
		must(t, err)
		var s struct{ Tensors int }
		must(t, json.Unmarshal([]byte(info), &s))
		return s.Tensors
	}
	func() {
		for i := 0; i < 5; i++ {
			_, err := ctx.Alloc(genie.F32, []int64{16}, "")
			must(t, err)
		}
	}()
	if n := count(); n != 5 {
		t.Fatalf("server holds %d tensors, want 5", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("unreachable tensors not released by their finalizers: %d left", count())
		}
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTLSSettingsReachTheLibrary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "server.pem")
	_, err := genie.NewServer(&genie.Options{IgnoreEnv: true, TLSCert: missing}, "", 0)
	expectErr(t, err, genie.ErrInvalidArgument, "private key")
	// The files are read when the server starts: the missing one is named.
	_, err = genie.NewServer(&genie.Options{IgnoreEnv: true, TLSCert: missing, TLSKey: missing, TLSCA: missing}, "", 0)
	expectErr(t, err, genie.ErrInvalidArgument, "server.pem")
}

func TestTraceStartStop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.json")
	must(t, genie.TraceStart(path))
	must(t, genie.TraceStart(path)) // the same path again does nothing
	if err := genie.TraceStart(filepath.Join(t.TempDir(), "other.json")); !errors.Is(err, genie.ErrInvalidArgument) {
		t.Fatalf("a second trace path: %v, want ErrInvalidArgument", err)
	}
	if err := genie.TraceStart(""); !errors.Is(err, genie.ErrInvalidArgument) {
		t.Fatalf("an empty path: %v, want ErrInvalidArgument", err)
	}
	must(t, genie.TraceStop())
	text, err := os.ReadFile(path)
	must(t, err)
	var doc map[string]interface{}
	must(t, json.Unmarshal(text, &doc))
	if _, ok := doc["traceEvents"]; !ok {
		t.Fatalf("no traceEvents in %s", text)
	}
}
