"""The kvflowmap graph: a ``networkx.MultiDiGraph`` of functions, classes,
request states and message fields (see ``docs/graph-model.md``), and
selections over it (``kvflowmap.graph.select``)."""
