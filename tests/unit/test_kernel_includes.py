"""Issue 19, finding 5: the built-in kernels' shared .cl helpers are included by name
(`#include "helper.cl"`, jit/cl_includes.py), once each, between #line directives, not
concatenated by each op in an order it must know; a build error points into the helper."""
from __future__ import annotations

from importlib import resources

import pytest

from customlayers.errors import KernelSourceError
from customlayers.jit.cl_includes import directive_line_map, expand_kernel_file
from customlayers.jit.launch import Arg, KernelLaunch
from customlayers.ops._program import kernel_source, read_kernel_file
from customlayers.runtime.device.build import map_build_log


def _reader(files: dict[str, str]):
    def read(name: str) -> str:
        if name not in files:
            raise FileNotFoundError(name)
        return files[name]
    return read


def _code(text: str) -> list[str]:
    """The lines the compiler sees as code: no #line directives, no resolver comments."""
    return [ln for ln in text.split("\n")
            if ln and not ln.startswith("#line") and not ln.startswith("// include")]


FILES = {
    "main.cl": '// main\n#include "a.cl"\n#include "b.cl"\nkernel void k() {}\n',
    "a.cl": '#include "common.cl"\nint a;\n',
    "b.cl": '#include "common.cl"\nint b;\n',
    "common.cl": "int common;\n",
}


def test_helpers_are_expanded_by_name_once_each_in_include_order():
    text = expand_kernel_file("main.cl", _reader(FILES))
    # common.cl is included by a.cl and b.cl: it is pasted once, where a.cl includes it
    assert _code(text) == ["// main", "int common;", "int a;", "int b;", "kernel void k() {}"]
    assert text.count("int common;") == 1
    assert '// include "common.cl": already expanded above' in text



def test_every_line_carries_its_file_and_line():
    text = expand_kernel_file("main.cl", _reader(FILES))
    assert text.startswith('#line 1 "main.cl"\n')
    origins = dict(zip(text.split("\n"), directive_line_map(text)))
    assert origins["// main"] == ("main.cl", 1)
    assert origins["int common;"] == ("common.cl", 1)
    assert origins["int a;"] == ("a.cl", 2)
    assert origins["int b;"] == ("b.cl", 2)
    assert origins["kernel void k() {}"] == ("main.cl", 4)


def test_a_missing_helper_is_named_with_the_including_line():
    files = dict(FILES, **{"b.cl": '\n#include "nowhere.cl"\n'})
    with pytest.raises(KernelSourceError) as info:
        expand_kernel_file("main.cl", _reader(files))
    assert 'b.cl:2:1: #include "nowhere.cl": is no built-in kernel file' in str(info.value)


def test_a_missing_root_file_is_named():
    with pytest.raises(KernelSourceError, match='"nowhere.cl" is no built-in kernel file'):
        expand_kernel_file("nowhere.cl", _reader(FILES))


def test_a_cycle_is_an_error_with_the_chain():
    files = dict(FILES, **{"common.cl": '#include "main.cl"\n'})
    with pytest.raises(KernelSourceError) as info:
        expand_kernel_file("main.cl", _reader(files))
    message = str(info.value)
    assert "common.cl:1:1" in message and "makes a cycle" in message
    assert "main.cl:2 includes a.cl:1 includes common.cl:1 includes main.cl" in message


def test_a_helper_named_by_a_path_is_refused():
    files = dict(FILES, **{"a.cl": '#include "../x.cl"\n'})
    with pytest.raises(KernelSourceError, match="a.cl:1:1: .*not a bare file name"):
        expand_kernel_file("main.cl", _reader(files))


BUILTIN = sorted(e.name for e in resources.files("customlayers.ops").iterdir()
                 if e.name.endswith(".cl"))


@pytest.mark.parametrize("name", BUILTIN)
def test_every_builtin_kernel_file_expands(name):
    text = kernel_source(name)
    # none left, not even in the comment that marks one: PoCL keeps no compiled program of a
    # text holding "#include" (or keys it by the folder it was built in), so every program of
    # a new checkout was compiled again
    assert "#include" not in text
    line_map = directive_line_map(text)
    # each line of the expansion maps to the very line of the file it came from
    for line, origin in zip(text.split("\n"), line_map):
        if origin is not None and not line.startswith("// include"):
            assert read_kernel_file(origin[0]).split("\n")[origin[1] - 1] == line


@pytest.mark.parametrize("name", BUILTIN)
def test_each_kernel_file_is_in_a_program_once(name):
    text = kernel_source(name)
    files = {origin[0] for origin in directive_line_map(text) if origin}
    assert text.count('#line 1 "') == len(files)


def test_a_build_error_in_a_helper_maps_to_the_helper_and_its_line():
    """NVIDIA's compiler reports lines of the whole text (`<kernel>:LINE:COL`): the launch's
    line map, read from the #line directives, takes them back to the helper's file and line;
    PoCL honours the directives and names the helper itself, which stays."""
    broken = read_kernel_file("conv_epilogue.cl").replace(
        "#define BIAS_ARG\n", "#define BIAS_ARG\nint broken = ;\n", 1)
    at = broken.split("\n").index("int broken = ;") + 1

    def read(name: str) -> str:
        return broken if name == "conv_epilogue.cl" else read_kernel_file(name)

    source = "#define KH 3\n#define KW 3\n" + expand_kernel_file("conv_direct.cl", read)
    launch = KernelLaunch(source, "conv_direct", (Arg.input(0),), (1,))
    whole = source.split("\n").index("int broken = ;") + 1
    log = f"<kernel>:{whole}:14: error: expected expression\n"
    assert map_build_log(log, launch.line_map, "/tmp/gen.cl") == \
        f"conv_epilogue.cl:{at}:14: error: expected expression\n"
    pocl = f"conv_epilogue.cl:{at}:14: error: expected expression\n"
    assert map_build_log(pocl, launch.line_map, "/tmp/gen.cl") == pocl


def test_a_launch_with_its_own_line_map_keeps_it():
    mine = (None, ("user.cl", 1))
    launch = KernelLaunch('#line 1 "x.cl"\nint a;\n', "k", (), (1,), line_map=mine)
    assert launch.line_map == mine
    assert KernelLaunch("int a;\n", "k", (), (1,)).line_map == ()


def test_the_program_cache_key_covers_the_included_helpers():
    """runtime/device/cache.py hashes the program text, which holds every helper's text: an edit of
    a helper alone makes a new key for each program that includes it."""
    from types import SimpleNamespace

    from customlayers.runtime.device.cache import cache_key
    device = SimpleNamespace(platform=SimpleNamespace(name="P", version="1"), name="D",
                             version="1", driver_version="1")
    edited = dict(FILES, **{"common.cl": "int common_edited;\n"})
    keys = {cache_key(expand_kernel_file("main.cl", _reader(files)), "", device)
            for files in (FILES, edited)}
    assert len(keys) == 2
