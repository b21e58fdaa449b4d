"""Miniature of vLLM's package layout, written for kvflowmap's tests.

Only the shapes that matter to the KV-cache flow are kept: the v1 scheduler,
the KV connector base class and factory, the worker-side connector hooks and
the messages that travel between the scheduler and the workers.
"""
