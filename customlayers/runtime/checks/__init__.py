"""runtime/checks: finding what a custom layer does wrong, on request (--check-bounds,
--sanitize, check, run --check-with).

bounds.py         guard zones around every buffer, outputs pre-filled with a NaN pattern
bounds_process.py, bounds_worker.py  the guarded run in a child process: a crash is a finding
sanitize.py, sanitize_worker.py  a launch on Oclgrind, every invalid access at the user's lines
network_checks.py the checks for every custom layer of a whole model
reference_check.py  comparing outputs with a Python reference

May import: every runtime room but observe, and the floors below runtime.
"""
