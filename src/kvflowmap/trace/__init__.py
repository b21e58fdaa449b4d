"""``kvflowmap trace``: a vLLM + connector log read back onto the code.

The pieces, in the order a run uses them: ``code`` (what the analysis knows
about logging calls, as plain data), ``formats`` (a logging call's format
string as a pattern), ``parse`` (log lines to records), ``match`` (a record
to its logging call), ``story`` (records grouped per request), ``diagnose``
(what the protocol says about each story) and the ``output_*`` writers.
No click here: the command lives in ``kvflowmap.commands.trace_cmd``.
"""
