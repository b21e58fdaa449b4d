"""Rule kind `paired`."""

# being written
PARAMS: dict = {}


def check(ctx):
    return []
