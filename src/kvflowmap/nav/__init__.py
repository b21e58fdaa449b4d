"""Navigation queries over the kvflowmap graph: ``where``, ``path``, ``states``.

Each query returns plain data; the ``*_render`` helpers turn it into text or
JSON. Nothing here prints or imports rich except the text renderers.
"""
