"""config/sources/: the user's .cl sources of a descriptor, shared by every dialect: SourceFile
and how sources become lines of a generated program with a line map (source_text.py), and
`#include` resolved by the loader, never by the OpenCL compiler (includes.py, include_scan.py).
Pure Python; imports config's diagnostics, limits and messages, and files.py.

May import: config's diagnostics, limits and messages, errors and files.
"""
