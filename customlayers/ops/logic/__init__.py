"""ops/logic: elementwise ops on data that ops/tensor lacks: comparisons (Equal, Less, ...)
with a boolean result, logic (And, Or, Xor, Not), bitwise ops and BitShift, Where (a select), IsNaN
and IsInf, and the remaining math functions (trigonometric, hyperbolic, Round, ...).

May import: the ops package's shared modules (base, _program, reorder), ops/tensor (its
elementwise machinery), jit and the floors below. Not the other upper rooms.
"""
