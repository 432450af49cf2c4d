"""Issue 18, item 5: `#include` in a user's .cl is resolved by the loader (config/sources/includes.py),
never by the OpenCL compiler: relative to the including file, refused outside the config's
folder unless external sources are allowed, with #line directives that keep the user's files
and lines; guards, #pragma once, cycles and missing files handled."""
from __future__ import annotations

from pathlib import Path

import pytest

from customlayers.config import load_config_string, load_configs
from customlayers.config.codes import CODES
from customlayers.jit.program import generate_program
from customlayers.jit.tensor import TensorDesc

CONFIG = """<CustomLayer name="Inc" type="SimpleGPU" version="1">
  <Kernel entry="k">{sources}</Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0"/>
  </Buffers>
</CustomLayer>
"""
KERNEL = ("__kernel void k(__global const float* x, __global float* y)\n"
          "{ y[get_global_id(0)] = twice(x[get_global_id(0)]); }\n")
TWICE = "inline float twice(float v) { return 2.0f * v; }\n"
DESC = TensorDesc((1, 2, 3, 4))


def _config(tmp_path: Path, files: dict[str, str], sources=("k.cl",)) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    config = tmp_path / "inc.xml"
    config.write_text(CONFIG.format(sources="".join(f'<Source filename="{s}"/>'
                                                    for s in sources)))
    return config


def _load(config: Path, **kw):
    configs = load_configs([config], **kw)
    errors = [d for d in configs.diagnostics if d.severity == "error"]
    return configs, errors


def _program(configs):
    spec = configs.layers["Inc"]
    return generate_program(spec, [DESC], [DESC])


def test_an_absolute_include_outside_the_config_folder_is_refused(tmp_path):
    """`#include "/etc/passwd"` was read by the compiler whatever --allow-external-sources
    said."""
    config = _config(tmp_path, {"k.cl": '#include "/etc/passwd"\n' + TWICE + KERNEL})
    configs, (error,) = _load(config)
    assert "Inc" not in configs.layers
    assert (error.file, error.line, error.column, error.code) == \
        (str((tmp_path / "k.cl").resolve()), 1, 1, "CL046")
    assert error.message.startswith('#include "/etc/passwd": resolves to /etc/passwd, outside '
                                    "the config's directory")
    assert "--allow-external-sources" in error.message and "CL046" in CODES


def test_a_relative_escape_is_refused_and_allowed_with_external_sources(tmp_path):
    (tmp_path / "shared.h").write_text(TWICE)
    config = _config(tmp_path / "cfg", {"k.cl": '#include "../shared.h"\n' + KERNEL})
    _, (error,) = _load(config)
    assert error.code == "CL046" and "shared.h" in error.message
    configs, errors = _load(config, allow_external_sources=True)
    assert not errors
    program = _program(configs)
    assert "#include" not in program.text      # not even in a comment: PoCL's cache shuns it
    assert TWICE.strip() in program.text


def test_includes_resolve_beside_the_including_file_not_the_current_folder(tmp_path,
                                                                           monkeypatch):
    """A relative include was looked up by the compiler in the process's current folder."""
    config = _config(tmp_path / "cfg", {"k.cl": '#include "lib/helpers.h"\n' + KERNEL,
                                        "lib/helpers.h": '#include "twice.h"\n',
                                        "lib/twice.h": TWICE})
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "twice.h").write_text("#error the current folder's file\n")
    monkeypatch.chdir(tmp_path / "elsewhere")
    configs, errors = _load(config)
    assert not errors
    program = _program(configs)
    assert TWICE.strip() in program.text and "#error" not in program.text
    # every line keeps its origin: the compiler's #line directives and the line map agree
    lines = program.text.split("\n")
    at = lines.index(TWICE.strip())
    twice_h = str((tmp_path / "cfg" / "lib" / "twice.h").resolve())
    assert program.line_map[at] == (twice_h, 1)
    assert lines[at - 1] == f'#line 1 "{twice_h}"'
    kernel_line = lines.index(KERNEL.split("\n")[0])
    k_cl = str((tmp_path / "cfg" / "k.cl").resolve())
    assert program.line_map[kernel_line] == (k_cl, 2)
    assert f'#line 2 "{k_cl}"' in lines[:kernel_line]


def test_a_missing_include_is_a_diagnostic_at_its_file_and_line(tmp_path):
    config = _config(tmp_path, {"k.cl": KERNEL, "lib.h": "// helpers\n\n#include \"gone.h\"\n",
                                "main.cl": '#include "lib.h"\n' + KERNEL},
                     sources=("main.cl",))
    _, (error,) = _load(config)
    assert (error.file, error.line, error.code) == (str((tmp_path / "lib.h").resolve()), 3,
                                                     "CL043")
    assert error.message.startswith('#include "gone.h": no such file (looked for ')


def test_guards_and_pragma_once_include_a_file_once_and_cycles_are_named(tmp_path):
    files = {"a.h": "#pragma once\n#include \"b.h\"\ninline float twice(float v) "
                    "{ return 2.0f * v; }\n",
             "b.h": "#ifndef B_H\n#define B_H\n#include \"a.h\"\n#define B_VALUE 1\n#endif\n",
             "k.cl": '#include "a.h"\n#include "b.h"\n#include "a.h"\n' + KERNEL,
             "k2.cl": '#include "a.h"\n'}
    configs, errors = _load(_config(tmp_path, files, sources=("k.cl", "k2.cl")))
    assert not errors
    text = _program(configs).text
    # each file is in each Source once (b.h through a.h and again directly, a.h twice), each
    # time inside its guard, so the compiler keeps only the first: the second Source's copies
    # (k2.cl includes a.h, which includes b.h) add nothing
    assert text.count("#define B_VALUE 1") == 2
    assert text.count("inline float twice") == 2
    guard = next(line.split()[1] for line in text.split("\n") if "CUSTOMLAYERS_ONCE_" in line)
    assert text.count(f"#ifndef {guard}") == 2 and "#pragma once\n" not in text
    # without guards, a cycle is an error naming the chain
    files = {"x.h": '#include "y.h"\n', "y.h": "\n#include \"x.h\"\n",
             "k.cl": '#include "x.h"\n' + KERNEL}
    _, (error,) = _load(_config(tmp_path / "cycle", files))
    assert error.code == "CL043" and error.line == 2 and "makes a cycle (" in error.message
    assert "k.cl:1 includes" in error.message and "x.h:1 includes" in error.message


def test_directives_in_comments_and_strings_are_not_includes_and_continuations_are(tmp_path):
    files = {"k.cl": ('// #include "/etc/passwd"\n/* #include "gone.h"\n*/\n'
                      'constant char* s = "#include \\"gone.h\\"";\n'
                      '#  include \\\n  "t.h"\n' + KERNEL),
             "t.h": TWICE}
    configs, errors = _load(_config(tmp_path, files))
    assert not errors
    program = _program(configs)
    lines = program.text.split("\n")
    k_cl = str((tmp_path / "k.cl").resolve())
    # the directive spans lines 5 and 6: the kernel is line 7
    assert program.line_map[lines.index(KERNEL.split("\n")[0])] == (k_cl, 7)


@pytest.mark.parametrize("directive, words", [
    ("#include <stdio.h>", "<...> names a file in the compiler's system folders"),
    ("#include HEADER", "must be named in quotes"),
    ('#include_next "t.h"', "#include_next is not supported"),
    ('#embed "t.h"', "#embed is not supported"),
    ('#include "t.h" /* a comment\n that goes on */', "a /* comment opened on the directive"),
])
def test_forms_the_loader_cannot_resolve_are_refused(tmp_path, directive, words):
    config = _config(tmp_path, {"k.cl": directive + "\n" + KERNEL, "t.h": TWICE})
    _, (error,) = _load(config)
    assert error.code == "CL043" and words in error.message and error.line == 1


def test_a_config_from_a_string_includes_only_its_given_sources():
    xml = CONFIG.format(sources='<Source filename="src/k.cl"/>')
    sources = {"src/k.cl": '#include "../inc/t.h"\n' + KERNEL, "inc/t.h": TWICE}
    configs = load_config_string(xml, sources, name="inc.xml")
    assert not configs.diagnostics.errors
    program = generate_program(configs.layers["Inc"], [DESC], [DESC])
    assert TWICE.strip() in program.text and ("inc/t.h", 1) in program.line_map
    sources["src/k.cl"] = '#include "/etc/hostname"\n' + KERNEL      # never read from disk
    configs = load_config_string(xml, sources, name="inc.xml")
    (error,) = configs.diagnostics.errors
    assert error.code == "CL043" and "is not among the given sources" in error.message


def test_an_include_that_is_not_a_regular_file_is_refused(tmp_path):
    import os
    config = _config(tmp_path, {"k.cl": '#include "pipe.h"\n' + KERNEL})
    os.mkfifo(tmp_path / "pipe.h")       # a FIFO would block the read forever
    _, (error,) = _load(config)
    assert error.code == "CL043" and "is not a regular file" in error.message


def test_fuzzed_names_are_diagnostics(tmp_path):
    """A NUL, a very long name, a folder: each a located CL043, never an exception."""
    for name in ("a\0b.h", "x" * 5000 + ".h", "."):
        config = _config(tmp_path / str(len(name)), {"k.cl": f'#include "{name}"\n' + KERNEL})
        _, (error,) = _load(config)
        assert error.code == "CL043" and error.line == 1, error
