"""runtime/observe: what a run looked like: per-layer device times (benchmark_app's -pc) and
Chrome/Perfetto traces.

profile.py        per-layer device times from OpenCL profiling events
trace.py          the Chrome trace event format

May import: runtime/compile and the rooms below it, and the floors below runtime.
"""
