"""runtime/tuning: kernel selection by timing (OpenPPL's algorithm selection, TensorRT's tactics).

tuning.py         the Tuner: lists an implementation's variants, times them, keeps the fastest
tuning_cache.py   the choices on disk, one JSON file per device and driver

May import: runtime/execute, runtime/device and the floors below runtime.
"""
