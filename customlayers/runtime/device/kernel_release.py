"""Releasing OpenCL kernels newest first.

A request binds one kernel object per launch, so a network of 60,000 nodes holds 60,000 kernels,
most of them of a few programs. PoCL keeps a program's kernels in a list, newest first, that
clReleaseKernel walks to find the one released: kernels released oldest first cost a walk past
every younger one, and releasing a network whose kernels went in the order a garbage collection
happened to clear them took 50 s (quadratic in the kernels). Released newest first, each is at
the head of its list: milliseconds for the lot. Other drivers do not care about the order; the
owners (InferRequest, Network) release in this one when they die.
"""
from __future__ import annotations

import itertools

_SERIALS = itertools.count()


def next_serial() -> int:
    """A number that orders the kernel owners by creation."""
    return next(_SERIALS)


def release_newest_first(launches: list) -> None:
    """Empty `launches` (a request's launch tuples, in creation order) from its end, so that each
    kernel's last reference goes in reverse creation order."""
    while launches:
        launches.pop()


def release_requests(requests) -> None:
    """Release the kernels of `requests`, the newest request first (see the module's text)."""
    for request in sorted(requests, key=lambda r: r.serial, reverse=True):
        request.release_kernels()
