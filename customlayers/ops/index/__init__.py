"""ops/index: the ops that compute or follow indices: GatherElements, GatherND,
ScatterElements, ScatterND, ArgMax/ArgMin, TopK, CumSum/CumProd, OneHot, Hardmax, Range on data,
Einsum (the patterns exporters emit) and the like.

May import: the ops package's shared modules (base, _program, reorder), the base rooms (nn,
reduce, tensor), jit and the floors below. Not the other upper rooms.
"""
