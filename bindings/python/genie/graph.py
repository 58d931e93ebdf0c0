"""Graph (genie_graph_t) and its Node pairs."""

import collections

import numpy as np

from . import errors
from ._handle import _Handle
from ._lib import capi
from .dtypes import dtype_code, dtype_name
from .enums import MODALITIES, PHASES, ROLES, _enum

Node = collections.namedtuple("Node", ["name", "op"])
Node.__doc__ = "A node of a Graph: its name and its operator (Graph.nodes)."


class Graph(_Handle):
    """A graph of tensor operations under construction (genie_graph_t).
    Not thread-safe while being built; submit it from any thread."""

    def __init__(self, name=None, _handle=None):
        self._h = _handle if _handle is not None else capi.genie_graph_create(name)

    @staticmethod
    def _destroy(h):
        capi.genie_graph_destroy(h)

    @classmethod
    def from_json(cls, text):
        """Builds a graph from its JSON form (docs/graph-format.md)."""
        return cls(_handle=capi.genie_graph_from_json(text))

    def to_json(self):
        return capi.genie_graph_to_json(self._h)

    def input(self, name, shape, dtype="f32", role=None):
        """Declares graph input `name` (-1 dims are dynamic). Returns name."""
        capi.genie_graph_add_input(self._h, name, dtype_code(dtype), [int(d) for d in shape])
        if role is not None:
            self.set_role(name, role)
        return name

    def constant(self, name, array, role=None):
        """Adds a constant whose bytes are copied from `array`. Returns name."""
        array = np.ascontiguousarray(array)
        capi.genie_graph_add_constant(self._h, name, dtype_code(array.dtype),
                                      list(array.shape), array)
        if role is not None:
            self.set_role(name, role)
        return name

    def node(self, op, name, inputs, outputs=None, attrs=None, *, phase=None, module=None,
             layer=None, modality=None):
        """Adds node `name` applying `op` to the values named in `inputs`
        (None for an omitted optional input). `outputs` defaults to
        [name + ".out"]. Sets `attrs` and the given annotations. Returns the
        output name (or the list of names for several outputs)."""
        if outputs is None:
            outputs = [name + ".out"]
        elif isinstance(outputs, str):
            outputs = [outputs]
        if isinstance(inputs, str):
            inputs = [inputs]
        capi.genie_graph_add_node(self._h, op, name, list(inputs), list(outputs))
        for k, v in (attrs or {}).items():
            self.set_attr(name, k, v)
        if phase is not None:
            self.set_phase(name, phase)
        if module is not None:
            self.set_module(name, module)
        if layer is not None:
            self.set_layer(name, layer)
        if modality is not None:
            self.set_modality(name, modality)
        return outputs[0] if len(outputs) == 1 else list(outputs)

    def set_attr(self, node, key, value):
        """Sets an attribute; its type follows the Python value: int/bool,
        float, str, a sequence of ints, a sequence of floats."""
        if isinstance(value, (bool, int, np.integer)):
            capi.genie_graph_set_attr_int(self._h, node, key, int(value))
        elif isinstance(value, (float, np.floating)):
            capi.genie_graph_set_attr_float(self._h, node, key, float(value))
        elif isinstance(value, str):
            capi.genie_graph_set_attr_string(self._h, node, key, value)
        elif isinstance(value, (list, tuple, np.ndarray)):
            vals = list(value)
            if any(isinstance(v, (float, np.floating)) for v in vals):
                capi.genie_graph_set_attr_floats(self._h, node, key, [float(v) for v in vals])
            else:
                capi.genie_graph_set_attr_ints(self._h, node, key, [int(v) for v in vals])
        else:
            raise errors.InvalidAttributeError(
                f"attribute '{key}' of node '{node}': unsupported Python type {type(value).__name__}")

    def set_phase(self, node, phase):
        capi.genie_graph_set_phase(self._h, node, _enum(PHASES, phase, "phase"))

    def set_module(self, node, module_path):
        capi.genie_graph_set_module(self._h, node, module_path)

    def set_layer(self, node, layer):
        capi.genie_graph_set_layer(self._h, node, int(layer))

    def set_modality(self, node, modality):
        capi.genie_graph_set_modality(self._h, node, _enum(MODALITIES, modality, "modality"))

    def set_role(self, value, role):
        capi.genie_graph_set_role(self._h, value, _enum(ROLES, role, "role"))

    def output(self, *values):
        """Marks values as graph outputs, in order."""
        self._outputs = None
        for v in values:
            capi.genie_graph_mark_output(self._h, v)

    def validate(self):
        capi.genie_graph_validate(self._h)
        return self

    @property
    def num_nodes(self):
        return capi.genie_graph_num_nodes(self._h)

    @property
    def nodes(self):
        """The nodes as (name, op) pairs, in the order they were added."""
        n = capi.genie_graph_num_nodes(self._h)
        return [Node(capi.genie_graph_node_name(self._h, i), capi.genie_graph_node_op(self._h, i)) for i in range(n)]

    @property
    def inputs(self):
        n = capi.genie_graph_num_inputs(self._h)
        return [capi.genie_graph_input_name(self._h, i) for i in range(n)]

    _outputs = None

    @property
    def outputs(self):
        """Output names in mark order (the order of a future's outputs)."""
        if self._outputs is None or self._h is None:
            n = capi.genie_graph_num_outputs(self._h)
            self._outputs = [capi.genie_graph_output_name(self._h, i) for i in range(n)]
        return list(self._outputs)

    def value_info(self, value):
        """(dtype name, shape) of a value (validate first for node outputs)."""
        code, shape = capi.genie_graph_value_info(self._h, value)
        return dtype_name(code), tuple(shape)

    @property
    def hash(self):
        """Structural hash (equal structure, equal hash, across processes)."""
        return capi.genie_graph_hash(self._h)

    def __repr__(self):
        if self._h is None:
            return "<genie.Graph closed>"
        return f"<genie.Graph nodes={self.num_nodes} inputs={self.inputs} outputs={self.outputs}>"
