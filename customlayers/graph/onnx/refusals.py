"""Every node of a model the reader cannot run, told in one refusal.

A model may need several ops we lack and several forms we do not take (an input that must be
a constant, a mode, a dtype). The reader goes on past a node it refuses: the refusal is noted
here, the node's outputs are marked refused, and a later node that reads one is skipped without
a message of its own (it would only repeat the first one's cause). At the end, one ModelError
lists every refused node with its reason, and the ops without a translation grouped by op
(checks.refuse_untranslated's wording).
"""
from __future__ import annotations

from ...errors import ModelError
from ..guard import is_unchecked
from .checks import own_layer_hint, refuse_untranslated
from .translate import NOT_TRANSLATED

# the refused nodes named one by one in the message; past these, a count
MAX_LISTED = 20


class Refusals:
    def __init__(self, file: str):
        self.file = file
        self.errors: list[ModelError] = []
        self.refused_values: set[str] = set()
        self.missing: list[tuple] = []          # (index, name, node) of ops with no translation

    def reads_refused(self, node) -> bool:
        return any(i in self.refused_values for i in node.input if i)

    def skip(self, node) -> None:
        """A node not translated (it reads a refused value, or its op has no translation)."""
        self.refused_values.update(o for o in node.output if o)

    def add(self, node, error: ModelError) -> None:
        self.errors.append(error)
        self.skip(node)

    def raise_if_any(self, is_custom, translated, known: list[str]) -> None:
        if not self.errors and not self.missing:
            return
        if len(self.errors) == 1 and not self.missing:
            raise self.errors[0]                 # one refusal: its own message, as it was
        if not self.errors:
            refuse_untranslated(self.missing, is_custom, translated, self.file, known,
                                NOT_TRANSLATED)
        reasons = [self._without_file(str(e)) for e in self.errors]
        shown = reasons[:MAX_LISTED]
        more = f"; and {len(reasons) - MAX_LISTED} more" if len(reasons) > MAX_LISTED else ""
        ops = sorted({n.op_type for _, _, n in self.missing})
        missing = ""
        why = "".join(f"; {op}: {NOT_TRANSLATED[op]}" for op in ops if op in NOT_TRANSLATED)
        if ops:
            nodes = ", ".join(f"{i} '{name}' ({n.op_type})" for i, name, n in self.missing[:10])
            extra = f" and {len(self.missing) - 10} more" if len(self.missing) > 10 else ""
            missing = (f". Ops with no translation to IR ops here: {', '.join(ops)} (nodes "
                       f"{nodes}{extra}{why}); for each, {own_layer_hint('its type')}; "
                       f"translated: {', '.join(known)}")
        count = len(self.errors) + len(self.missing)
        error = ModelError(f"{self.file}: {count} node(s) of the model cannot be run here: "
                           f"{'; '.join(shown)}{more}{missing}")
        error.unchecked = any(is_unchecked(e) for e in self.errors)
        raise error

    def _without_file(self, text: str) -> str:
        prefix = f"{self.file}: "
        return text[len(prefix):] if text.startswith(prefix) else text
