package genie_test

import (
	"math"
	"os"
	"testing"

	"genie.dev/genie"
)

// The model of tests/data/make_linear_relu_onnx.py: y = relu(x @ w + b).
func linearReluExpected(x []float32) []float32 {
	b := []float32{0.5, -0.5, 1, -1}
	y := make([]float32, 8)
	for r := 0; r < 2; r++ {
		for c := 0; c < 4; c++ {
			s := b[c]
			for k := 0; k < 3; k++ {
				s += x[r*3+k] * (float32(k*4+c) - 5) / 4
			}
			y[r*4+c] = float32(math.Max(0, float64(s)))
		}
	}
	return y
}

func TestImportONNX(t *testing.T) {
	model, err := os.ReadFile("../../tests/data/linear_relu.onnx")
	must(t, err)
	ctx := newContext(t, nil)
	m, err := ctx.ImportONNX(model, "")
	must(t, err)
	defer m.Close()
	if len(m.Inputs) != 1 || m.Inputs[0] != "x" || len(m.Weights) != 2 || m.Weights["w"] == nil || m.Weights["b"] == nil {
		t.Fatalf("inputs %v, weights %v", m.Inputs, m.Weights)
	}
	x := []float32{1, -2, 0.5, 3, 0.25, -1}
	xt, err := ctx.TensorFromFloat32([]int64{2, 3}, x, "")
	must(t, err)
	defer xt.Close()
	f, err := m.Submit(ctx, map[string]*genie.Tensor{"x": xt})
	must(t, err)
	defer f.Close()
	must(t, f.Wait())
	yt, err := f.OutputByName("y")
	must(t, err)
	defer yt.Close()
	y, err := yt.Float32s()
	must(t, err)
	checkClose(t, y, linearReluExpected(x))

	// Not a model: ErrParse; truncated: an error, nothing leaked.
	_, err = ctx.ImportONNX([]byte("not an onnx model"), "")
	expectErr(t, err, genie.ErrParse, "")
	_, err = ctx.ImportONNX(model[:len(model)/2], "")
	if err == nil {
		t.Fatal("a truncated model imported")
	}
}

func TestOpLibraryErrors(t *testing.T) {
	expectErr(t, genie.LoadOpLibrary("/nonexistent/libops.so"), genie.ErrIO, "/nonexistent/libops.so")
	if genie.OpRegistered("relu") || genie.OpRegistered("vendor.none") {
		t.Fatal("built-in or unknown op reported as a registered custom op")
	}
}
