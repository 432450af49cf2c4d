"""ops/image: detection and segmentation ops: Resize and Upsample (every mode of ONNX),
GridSample, RoiAlign, NonMaxSuppression and the like.

May import: the ops package's shared modules (base, _program, reorder), the base rooms (nn,
reduce, tensor), jit and the floors below. Not the other upper rooms.
"""
