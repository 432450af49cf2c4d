"""Built-in layers. Importing this package registers every op (see base.register_op)."""
from .base import OPS, Attr, Op, get_op, register_op  # noqa: F401

# Each module registers its ops on import. Keep this list explicit.
from . import _modules  # noqa: F401,E402
