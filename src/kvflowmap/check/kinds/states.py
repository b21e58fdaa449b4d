"""Rule kind `states`."""

# being written
PARAMS: dict = {}


def check(ctx):
    return []
