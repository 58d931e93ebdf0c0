"""OnnxModel: an imported ONNX model with its resident weights."""


class OnnxModel:
    """An imported ONNX model (Context.import_onnx): ``graph``, and
    ``weights`` (graph input name -> Tensor, resident until closed).
    ``inputs`` are the names the caller binds: the model's own inputs.
    submit() and run() bind the weights with the caller's inputs. A context
    manager; close() releases the graph and the weights."""

    def __init__(self, ctx, graph, weights):
        self._ctx = ctx
        self.graph = graph
        self.weights = weights
        self.inputs = [n for n in graph.inputs if n not in weights]
        self.outputs = graph.outputs

    def submit(self, inputs):
        """Submits the graph with `inputs` (name -> Tensor or numpy array)
        and the resident weights; returns a Future."""
        return self._ctx.submit(self.graph, {**self.weights, **inputs})

    def run(self, inputs, timeout=None):
        """Runs and reads every output: {output name: ndarray}."""
        with self.submit(inputs) as fut:
            return fut.numpy(timeout)

    def close(self):
        for t in self.weights.values():
            t.close()
        self.graph.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"<genie.OnnxModel nodes={self.graph.num_nodes} inputs={self.inputs} "
                f"outputs={self.outputs} weights={len(self.weights)}>")
