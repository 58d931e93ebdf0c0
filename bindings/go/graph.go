package genie

import (
	"fmt"
	"runtime"

	"genie.dev/genie/internal/capi"
)

// Graph is a DAG of tensor operations with semantic annotations. Its
// methods lock it: build it from any goroutine, submit it to any context.
// docs/operators.md lists the operators with their inputs and attributes.
type Graph struct{ h handle }

func newGraph(p uintptr) *Graph {
	g := &Graph{h: handle{p: p, kind: "graph"}}
	runtime.SetFinalizer(g, (*Graph).Close)
	return g
}

// NewGraph creates an empty graph; name may be "".
func NewGraph(name string) (*Graph, error) {
	const op = "genie_graph_create"
	if err := checkNames(op, name); err != nil {
		return nil, err
	}
	var p uintptr
	if err := call(op, func() int { return capi.Genie_graph_create(name, &p) }); err != nil {
		return nil, err
	}
	return newGraph(p), nil
}

// GraphFromJSON builds a graph from its JSON form (docs/graph-format.md).
func GraphFromJSON(json string) (*Graph, error) {
	var p uintptr
	if err := call("genie_graph_from_json", func() int { return capi.Genie_graph_from_json(json, &p) }); err != nil {
		return nil, err
	}
	return newGraph(p), nil
}

// Close destroys the graph (futures of submitted graphs are not affected).
// Closing twice does nothing.
func (g *Graph) Close() error {
	runtime.SetFinalizer(g, nil)
	g.h.close(func(p uintptr) { capi.Genie_graph_destroy(p) })
	return nil
}

// do runs one call on the locked graph; names are checked for NUL bytes.
func (g *Graph) do(op string, names []string, f func(p uintptr) int) error {
	if err := checkNames(op, names...); err != nil {
		return err
	}
	p, err := g.h.acquireExclusive(op)
	if err != nil {
		return err
	}
	defer g.h.mu.Unlock()
	return call(op, func() int { return f(p) })
}

// AddInput declares a graph input; a -1 dimension takes the size of the
// tensor bound at submission.
func (g *Graph) AddInput(name string, dtype DType, shape []int64) error {
	return g.do("genie_graph_add_input", []string{name}, func(p uintptr) int {
		return capi.Genie_graph_add_input(p, name, capi.Enum_SS_genie_dtype(dtype), shape)
	})
}

// AddConstant adds a constant whose bytes (exactly dtype × shape) are
// copied into the graph.
func (g *Graph) AddConstant(name string, dtype DType, shape []int64, data []byte) error {
	return g.do("genie_graph_add_constant", []string{name}, func(p uintptr) int {
		return capi.Genie_graph_add_constant(p, name, capi.Enum_SS_genie_dtype(dtype), shape, data)
	})
}

// AddConstantFloat32 adds an f32 constant.
func (g *Graph) AddConstantFloat32(name string, shape []int64, data []float32) error {
	return g.AddConstant(name, F32, shape, float32Bytes(data))
}

// AddNode adds node name applying operator op to the values named in
// inputs ("" for an omitted optional input), producing the values named in
// outputs. An unknown op gives ErrUnknownOp (the detail lists close names).
func (g *Graph) AddNode(op, name string, inputs, outputs []string) error {
	names := append(append([]string{op, name}, inputs...), outputs...)
	return g.do("genie_graph_add_node", names, func(p uintptr) int {
		return capi.Genie_graph_add_node(p, op, name, joinNames(inputs), joinNames(outputs))
	})
}

// SetAttrInt sets an integer attribute of a node.
func (g *Graph) SetAttrInt(node, key string, v int64) error {
	return g.do("genie_graph_set_attr_int", []string{node, key}, func(p uintptr) int {
		return capi.Genie_graph_set_attr_int(p, node, key, v)
	})
}

// SetAttrFloat sets a floating-point attribute of a node.
func (g *Graph) SetAttrFloat(node, key string, v float64) error {
	return g.do("genie_graph_set_attr_float", []string{node, key}, func(p uintptr) int {
		return capi.Genie_graph_set_attr_float(p, node, key, v)
	})
}

// SetAttrString sets a string attribute of a node.
func (g *Graph) SetAttrString(node, key, v string) error {
	return g.do("genie_graph_set_attr_string", []string{node, key, v}, func(p uintptr) int {
		return capi.Genie_graph_set_attr_string(p, node, key, v)
	})
}

// SetAttrInts sets an integer-list attribute of a node.
func (g *Graph) SetAttrInts(node, key string, v []int64) error {
	return g.do("genie_graph_set_attr_ints", []string{node, key}, func(p uintptr) int {
		return capi.Genie_graph_set_attr_ints(p, node, key, v)
	})
}

// SetAttrFloats sets a float-list attribute of a node.
func (g *Graph) SetAttrFloats(node, key string, v []float64) error {
	return g.do("genie_graph_set_attr_floats", []string{node, key}, func(p uintptr) int {
		return capi.Genie_graph_set_attr_floats(p, node, key, v)
	})
}

// SetPhase annotates a node with its execution phase.
func (g *Graph) SetPhase(node string, phase Phase) error {
	return g.do("genie_graph_set_phase", []string{node}, func(p uintptr) int {
		return capi.Genie_graph_set_phase(p, node, capi.Enum_SS_genie_phase(phase))
	})
}

// SetModule annotates a node with its module path ("" clears it).
func (g *Graph) SetModule(node, modulePath string) error {
	return g.do("genie_graph_set_module", []string{node, modulePath}, func(p uintptr) int {
		return capi.Genie_graph_set_module(p, node, modulePath)
	})
}

// SetLayer annotates a node with its layer index (-1 clears it).
func (g *Graph) SetLayer(node string, layer int) error {
	return g.do("genie_graph_set_layer", []string{node}, func(p uintptr) int {
		return capi.Genie_graph_set_layer(p, node, layer)
	})
}

// SetModality annotates a node with its modality.
func (g *Graph) SetModality(node string, m Modality) error {
	return g.do("genie_graph_set_modality", []string{node}, func(p uintptr) int {
		return capi.Genie_graph_set_modality(p, node, capi.Enum_SS_genie_modality(m))
	})
}

// SetRole annotates a value (input, constant or node output) with its role.
func (g *Graph) SetRole(value string, role Role) error {
	return g.do("genie_graph_set_role", []string{value}, func(p uintptr) int {
		return capi.Genie_graph_set_role(p, value, capi.Enum_SS_genie_tensor_role(role))
	})
}

// MarkOutput marks a value as a graph output (outputs are numbered in call
// order).
func (g *Graph) MarkOutput(value string) error {
	return g.do("genie_graph_mark_output", []string{value}, func(p uintptr) int {
		return capi.Genie_graph_mark_output(p, value)
	})
}

// Validate checks the graph and infers every shape and dtype; the detail of
// an error names the node and what is wrong.
func (g *Graph) Validate() error {
	return g.do("genie_graph_validate", nil, func(p uintptr) int { return capi.Genie_graph_validate(p) })
}

// NumNodes is the number of nodes.
func (g *Graph) NumNodes() (int, error) {
	var n uint64
	err := g.do("genie_graph_num_nodes", nil, func(p uintptr) int { return capi.Genie_graph_num_nodes(p, &n) })
	return int(n), err
}

// Node is a node of a graph: its name and its operator.
type Node struct {
	Name string
	Op   string
}

// Nodes lists the graph's nodes in the order they were added (or listed
// in the JSON it was built from).
func (g *Graph) Nodes() ([]Node, error) {
	count := func(p uintptr, n *uint64) int { return capi.Genie_graph_num_nodes(p, n) }
	names, err := g.names("genie_graph_num_nodes", "genie_graph_node_name", count,
		func(p uintptr, i int64, s *uintptr) int { return capi.Genie_graph_node_name(p, i, s) })
	if err != nil {
		return nil, err
	}
	ops, err := g.names("genie_graph_num_nodes", "genie_graph_node_op", count,
		func(p uintptr, i int64, s *uintptr) int { return capi.Genie_graph_node_op(p, i, s) })
	if err != nil {
		return nil, err
	}
	if len(ops) != len(names) {
		return nil, fmt.Errorf("genie: graph changed while its nodes were listed")
	}
	nodes := make([]Node, len(names))
	for i := range names {
		nodes[i] = Node{Name: names[i], Op: ops[i]}
	}
	return nodes, nil
}

// Inputs lists the declared graph inputs in declaration order.
func (g *Graph) Inputs() ([]string, error) {
	return g.names("genie_graph_num_inputs", "genie_graph_input_name",
		func(p uintptr, n *uint64) int { return capi.Genie_graph_num_inputs(p, n) },
		func(p uintptr, i int64, s *uintptr) int { return capi.Genie_graph_input_name(p, i, s) })
}

// Outputs lists the outputs in mark order (a future's output order).
func (g *Graph) Outputs() ([]string, error) {
	return g.names("genie_graph_num_outputs", "genie_graph_output_name",
		func(p uintptr, n *uint64) int { return capi.Genie_graph_num_outputs(p, n) },
		func(p uintptr, i int64, s *uintptr) int { return capi.Genie_graph_output_name(p, i, s) })
}

func (g *Graph) names(countOp, nameOp string, count func(uintptr, *uint64) int,
	name func(uintptr, int64, *uintptr) int) ([]string, error) {
	p, err := g.h.acquireExclusive(countOp)
	if err != nil {
		return nil, err
	}
	defer g.h.mu.Unlock()
	var n uint64
	if err := call(countOp, func() int { return count(p, &n) }); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		var s uintptr
		if err := call(nameOp, func() int { return name(p, int64(i), &s) }); err != nil {
			return nil, err
		}
		b := make([]byte, capi.Genie_go_strlen(s)) // borrowed: copied, not freed
		capi.Genie_go_copy(b, s)
		out[i] = string(b)
	}
	return out, nil
}

// ValueInfo returns the dtype and shape of a value, as inferred by
// Validate (or declared, for inputs and constants).
func (g *Graph) ValueInfo(value string) (DType, []int64, error) {
	var dtype int32
	var ndim uint64
	shape := make([]int64, MaxDims)
	err := g.do("genie_graph_value_info", []string{value}, func(p uintptr) int {
		return capi.Genie_graph_value_info(p, value, &dtype, shape, &ndim)
	})
	if err != nil {
		return 0, nil, err
	}
	return DType(dtype), shape[:ndim], nil
}

// Hash is the structural hash of the graph (equal for equal structure in
// any process).
func (g *Graph) Hash() (uint64, error) {
	var h uint64
	err := g.do("genie_graph_hash", nil, func(p uintptr) int { return capi.Genie_graph_hash(p, &h) })
	return h, err
}

// JSON serialises the graph (docs/graph-format.md).
func (g *Graph) JSON() (string, error) {
	var s uintptr
	var n uint64
	if err := g.do("genie_graph_to_json", nil, func(p uintptr) int { return capi.Genie_graph_to_json(p, &s, &n) }); err != nil {
		return "", err
	}
	return takeCString(s, int(n)), nil
}
