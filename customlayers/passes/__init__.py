"""passes: the graph rewrites and the fusion plan, pure Python (no device, no OpenCL)."""
