"""The request-lifecycle model: request ids through a connector's hooks.

See ``model.build_lifecycle``; the layers are ``spec`` (names from the
protocol file), ``view`` (one function's facts), ``ids`` (which names hold
ids), ``containers`` (request-keyed state), ``effects`` (what a statement
does with an id), ``paths`` (where an id is dropped) and ``reports`` (the
channels that report ids back to the scheduler).
"""
