"""Writes linear_relu.onnx beside this file: y = relu(x @ w + b) with x
f32[2, 3] the model's input and w f32[3, 4] = (i - 5) / 4 (row-major
index i), b f32[4] = [0.5, -0.5, 1, -1] initializers. The Go and Rust
bindings' ONNX tests import it and check y. Needs python3-onnx."""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

w = ((np.arange(12, dtype=np.float32) - 5) / 4).reshape(3, 4)
b = np.array([0.5, -0.5, 1, -1], dtype=np.float32)
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["xw"], name="/fc/MatMul"),
     helper.make_node("Add", ["xw", "b"], ["h"], name="/fc/Add"),
     helper.make_node("Relu", ["h"], ["y"], name="/act/Relu")],
    "linear_relu",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
    initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model)
onnx.save(model, os.path.join(os.path.dirname(os.path.abspath(__file__)), "linear_relu.onnx"))
