"""`customlayers validate`: output format, summary, exit codes, --format json, --strict,
--allow-external-sources, and --compile (the only part here that needs OpenCL: PoCL)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from customlayers.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = ROOT / "tests" / "data" / "configs"
GOOD = str(DATA / "good" / "multi_root.xml")
TEN = str(DATA / "bad" / "ten_mistakes.xml")
EXTERNAL = str(DATA / "nested" / "sub" / "external_source.xml")

LAYER = """<CustomLayer name="L" type="SimpleGPU" version="1">
  <Kernel entry="k">
    <Source filename="k.cl"/>
    <Define name="SCALE" type="float" default="2.0f"/>{extra}
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0"/>
  </Buffers>
</CustomLayer>
"""
KERNEL = """// scale by SCALE
__kernel void k(const __global INPUT0_TYPE* in, __global OUTPUT0_TYPE* out)
{
    out[get_global_id(0)] = in[get_global_id(0)] * SCALE;
}
"""


def run(capsys, *argv):
    code = main(["validate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_clean_config_exits_0_with_summary(capsys):
    code, out, _ = run(capsys, GOOD)
    assert code == 0
    assert out == "1 file, 2 layers: 0 errors, 0 warnings\n"


def test_errors_listed_in_the_documented_form_exit_1(capsys):
    code, out, _ = run(capsys, TEN, GOOD)
    lines = out.splitlines()
    assert code == 1
    assert f"{TEN}:10:55: error[CL023]: format 'Bfyx' is not one of BFYX, BYXF, YXFB, FYXB, " \
           f"ANY (or lower case) (layer Broken)" in lines
    assert any(line.startswith(f"{TEN}:15:3: warning[CL010]: ") for line in lines)
    # ReLU of the good file redefines nothing there; ten_mistakes has 4 layers, good has 2
    assert lines[-1] == "2 files, 6 layers: 15 errors, 2 warnings"


def test_json_output_is_one_array(capsys):
    code, out, err = run(capsys, TEN, "--format", "json")
    items = json.loads(out)
    assert code == 1 and len(items) == 17
    assert set(items[0]) == {"file", "line", "column", "severity", "code", "layer", "message"}
    assert items[0] == {"file": TEN, "line": 2, "column": 45, "severity": "error",
                        "code": "CL021", "layer": "Broken", "message": "version '2' is not '1'"}
    assert "1 file, 4 layers" in err


def test_strict_turns_warnings_into_errors(capsys, tmp_path):
    (tmp_path / "k.cl").write_text(KERNEL)
    (tmp_path / "c.xml").write_text(LAYER.format(extra='\n    <Define name="EMPTY"/>'))
    code, out, _ = run(capsys, tmp_path / "c.xml")
    assert code == 0 and "warning[CL051]" in out
    code, out, _ = run(capsys, "--strict", tmp_path / "c.xml")
    assert code == 1 and f"{tmp_path / 'c.xml'}:5:5: error[CL051]" in out
    assert out.splitlines()[-1] == "1 file, 1 layer: 1 error, 0 warnings"


def test_unreadable_file_exits_2_and_still_checks_the_rest(capsys, tmp_path):
    code, out, _ = run(capsys, tmp_path / "absent.xml", GOOD)
    assert code == 2
    assert f"{tmp_path / 'absent.xml'}: error[CL000]: cannot read the config" in out
    # every argument counts as a file, the unreadable one too
    assert out.splitlines()[-1] == "2 files, 2 layers: 1 error, 0 warnings"


def test_bad_arguments_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["validate"])
    assert e.value.code == 2
    code, _, err = run(capsys, GOOD, "--compile", "--shape", "ReLU")
    assert code == 2 and "--shape 'ReLU' is not LAYER=1x16x32x32" in err


def test_allow_external_sources(capsys):
    code, out, _ = run(capsys, EXTERNAL)
    assert code == 1 and "error[CL042]" in out
    code, out, _ = run(capsys, "--allow-external-sources", EXTERNAL)
    assert code == 0


def test_cli_py_entry_point():
    done = subprocess.run([sys.executable, str(ROOT / "cli.py"), "validate", TEN],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stdout.splitlines()[-1] == "1 file, 4 layers: 15 errors, 2 warnings"


# -- --compile: real builds on PoCL ------------------------------------------------------------

def test_compile_reports_build_errors_at_the_users_cl_line(capsys, tmp_path, cl_env):
    (tmp_path / "k.cl").write_text(KERNEL.replace("* SCALE;", "* SCALE"))  # line 4: no ';'
    (tmp_path / "c.xml").write_text(LAYER.format(extra=""))
    code, out, _ = run(capsys, tmp_path / "c.xml")
    assert code == 0  # the config itself is fine
    code, out, _ = run(capsys, tmp_path / "c.xml", "--compile", "-d", "CPU")
    assert code == 1
    first = out.splitlines()[0]
    assert first.startswith(f"{tmp_path / 'k.cl'}:4:") and "error[CL080]" in first
    assert first.endswith("(layer L)")


def test_compile_clean_layers_with_shapes(capsys, tmp_path, cl_env):
    (tmp_path / "k.cl").write_text(KERNEL)
    (tmp_path / "c.xml").write_text(LAYER.format(extra=""))
    code, out, _ = run(capsys, tmp_path / "c.xml", GOOD, "--compile", "-d", "CPU",
                       "--shape", "L=1x16x4x4", "--shape", "ScaleShift=1x4x2x2")
    assert (code, out) == (0, "2 files, 3 layers: 0 errors, 0 warnings\n")


def test_compile_argument_count_mismatch(capsys, tmp_path, cl_env):
    (tmp_path / "k.cl").write_text(KERNEL.replace("__global OUTPUT0_TYPE* out",
                                                  "__global OUTPUT0_TYPE* out, int n"))
    (tmp_path / "c.xml").write_text(LAYER.format(extra=""))
    code, out, _ = run(capsys, tmp_path / "c.xml", "--compile", "-d", "CPU")
    assert code == 1 and "error[CL080]" in out and "takes 3 arguments" in out


def test_compile_reports_compiler_warnings(capsys, tmp_path, cl_env):
    import random   # new code each run: PoCL's own cache would serve an older build's log
    (tmp_path / "k.cl").write_text(KERNEL.replace(
        "{\n", f"{{\n    int slow_path = {random.randrange(10 ** 9)}.5;\n", 1))
    (tmp_path / "c.xml").write_text(LAYER.format(extra=""))
    code, out, err = run(capsys, tmp_path / "c.xml", "--compile", "-d", "CPU")
    assert code == 0 and "CompilerWarning" not in err
    first = out.splitlines()[0]
    assert first.startswith(f"{tmp_path / 'k.cl'}:4:") and "warning[CL082]" in first
    assert "implicit conversion" in first and first.endswith("(layer L)")
    assert out.splitlines()[-1] == "1 file, 1 layer: 0 errors, 1 warning"


WORK_LAYER = LAYER.replace("</Buffers>\n", "</Buffers>\n  <WorkSizes {work}/>\n")


def test_compile_checks_the_local_size_against_the_device(capsys, tmp_path, cl_env):
    from customlayers.runtime.device.limits import supports_non_uniform_groups
    device = cl_env[2]
    (tmp_path / "k.cl").write_text(KERNEL)
    too_many = device.max_work_group_size * 2
    (tmp_path / "c.xml").write_text(WORK_LAYER.format(
        extra="", work=f'global="{too_many}" local="{too_many}"'))
    code, out, _ = run(capsys, tmp_path / "c.xml", "--compile", "-d", device.name)
    assert code == 1 and f"{tmp_path / 'c.xml'}:10:3: error[CL083]" in out
    assert f"allows at most {device.max_work_group_size}" in out
    if supports_non_uniform_groups(device):
        return
    # default input 1x3x8x8: global X,Y,B*F is 8,8,3, which local 8 does not divide
    (tmp_path / "c.xml").write_text(WORK_LAYER.format(extra="",
                                                      work='global="X,Y,B*F" local="8,8,8"'))
    code, out, _ = run(capsys, tmp_path / "c.xml", "--compile", "-d", device.name)
    assert code == 1 and "error[CL083]" in out
    assert "local[2]=8 does not divide global[2]=3" in out and "((B*F)+7)/8*8" in out


def test_compile_reports_rejected_options_at_the_compiler_options_element(capsys, tmp_path,
                                                                          cl_env):
    (tmp_path / "k.cl").write_text(KERNEL)
    xml = LAYER.replace("</Buffers>\n", '</Buffers>\n  <CompilerOptions options=""/>\n'
                                        '  <CompilerOptions options="-cl-no-such-option"/>\n')
    (tmp_path / "c.xml").write_text(xml.format(extra=""))
    code, out, _ = run(capsys, tmp_path / "c.xml", "--compile", "-d", "CPU")
    assert code == 1
    first = out.splitlines()[0]
    # line 11, the attribute's column: not the generated file's line 0
    assert first.startswith(f"{tmp_path / 'c.xml'}:11:20: error[CL080]: the OpenCL compiler "
                            f"rejects the build options '-cl-no-such-option'")
    assert "-cl-no-such-option" in first and first.endswith("(layer L)")


def test_summary_counts_every_file_argument(capsys, tmp_path):
    code, out, _ = run(capsys, GOOD, tmp_path / "absent.xml", tmp_path / "absent2.xml")
    assert code == 2 and out.splitlines()[-1] == "3 files, 2 layers: 2 errors, 0 warnings"


@pytest.mark.parametrize("command", ["run", "benchmark"])
def test_a_malformed_config_is_refused_before_a_device_is_chosen(tmp_path, capsys, command):
    """run and benchmark read the configs before they open the device (the registry is made
    on the engine afterwards): a device that does not exist is not what they report first."""
    bad = tmp_path / "bad.xml"
    bad.write_text('<CustomLayer name="X" type="SimpleGPU" version="1"><Kernel entry="k">'
                   '</Kernel></CustomLayer>')
    code = main([command, "-m", str(tmp_path / "model.onnx"), "-c", str(bad),
                 "-d", "no-such-device"])
    err = capsys.readouterr().err
    assert code != 0
    assert "has no <Buffers> element" in err and "no OpenCL device" not in err, err
