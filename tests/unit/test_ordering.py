"""Dependencies between the commands of one inference on an out-of-order queue (pure logic)."""
from __future__ import annotations

from customlayers.runtime.execute.run import command_dependencies, sinks


def _a(reads=(), writes=()):
    return frozenset(reads), frozenset(writes)


def test_read_after_write_waits_for_the_writer():
    deps = command_dependencies([_a(writes="A"), _a(reads="A", writes="B")])
    assert deps == [(), (0,)]


def test_a_reused_buffer_waits_for_its_earlier_readers_and_writer():
    # 0 writes slot S; 1 and 2 read it; 3 overwrites S (the planner reused it): 3 must wait
    # for both readers (write after read) and for 0 (write after write)
    deps = command_dependencies([
        _a(writes=["S"]), _a(reads=["S"], writes=["T"]), _a(reads=["S"], writes=["U"]),
        _a(reads=["T", "U"], writes=["S"])])
    assert deps == [(), (0,), (0,), (0, 1, 2)]


def test_readers_before_an_earlier_write_are_not_waited_for_again():
    deps = command_dependencies([
        _a(writes=["S"]), _a(reads=["S"], writes=["T"]), _a(reads=["T"], writes=["S"]),
        _a(reads=["T"], writes=["S"])])
    # 3 overwrites S after 2 wrote it: it waits for 2 (the writer) and reads T after 1
    assert deps[3] == (1, 2)


def test_independent_commands_have_no_dependencies_and_are_all_sinks():
    deps = command_dependencies([_a(writes=["A"]), _a(writes=["B"]), _a(reads=["C"])])
    assert deps == [(), (), ()]
    assert sinks(deps) == [0, 1, 2]


def test_the_sinks_of_a_chain_are_its_last_commands():
    deps = command_dependencies([_a(writes=["A"]), _a(reads=["A"], writes=["B"]),
                                 _a(reads=["A"], writes=["C"])])
    assert sinks(deps) == [1, 2]
