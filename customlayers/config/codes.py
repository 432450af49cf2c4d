"""The stable diagnostic codes of the config loader and `validate`, one line each.

Codes never change meaning once published: CI scripts and editors filter on them. Add new codes
at the end of their group; retire a code by leaving it here with "(retired)".
"""
from __future__ import annotations

CODES: dict[str, str] = {
    # -- the file as XML ---------------------------------------------------------------------
    "CL000": "the config file cannot be read (validate exits 2)",
    "CL001": "the file is not well-formed XML",
    "CL002": "a DOCTYPE declares entities (refused: no entity is ever expanded)",
    "CL003": "the file's bytes cannot be decoded in its declared encoding",
    "CL004": "the file holds no <CustomLayer> element",
    "CL005": "a DOCTYPE without entities is ignored (no DTD is loaded)",
    "CL006": "the file has more elements than any config needs (over 10,000)",
    # -- structure (JSON Schema) -------------------------------------------------------------
    "CL010": "unknown element (ignored)",
    "CL011": "unknown attribute (ignored)",
    "CL012": "a required element is missing",
    "CL013": "a required attribute is missing",
    "CL014": "an element that may appear once appears more than once",
    "CL015": "an attribute that needs a value is empty",
    "CL016": "a value does not have the expected form",
    "CL017": "text inside an element (ignored: a config's elements hold attributes, no text)",
    # -- attribute values --------------------------------------------------------------------
    "CL020": "CustomLayer type is not SimpleGPU or MVCL",
    "CL021": "CustomLayer version is not 1",
    "CL022": "Tensor type is not input or output",
    "CL023": "Tensor format is not BFYX, BYXF, YXFB, FYXB or ANY (upper or lower case)",
    "CL024": "arg-index or port-index is not a non-negative integer",
    "CL025": "WorkSizes dim is not output, input, input,N or input N",
    "CL026": "an arg-index, port-index or dim input N is over its bound (1023: see limits.py)",
    # -- buffers -----------------------------------------------------------------------------
    "CL030": "two buffers bind the same arg-index",
    "CL031": "arg-index values leave a gap (every kernel argument must be bound)",
    "CL032": "the layer has no output Tensor",
    "CL033": "two Tensors bind the same port (type and port-index)",
    "CL034": "WorkSizes dim names an input the layer does not have",
    "CL035": "input (or output) port-index values leave a gap (ports must be 0..N-1)",
    "CL036": "<Buffers> binds more buffers than a kernel can take (1024)",
    # -- sources -----------------------------------------------------------------------------
    "CL040": "a Source file does not exist (or is not in the given sources)",
    "CL041": "a Source file cannot be read",
    "CL042": "a Source file lies outside the config's directory (see --allow-external-sources)",
    "CL043": "an #include in a Source cannot be resolved (no such file, not readable, a cycle, "
             "<...>, a name given by a macro)",
    "CL044": "the Kernel entry function is not defined in the sources",
    "CL046": "an #include in a Source names a file outside the config's directory (see "
             "--allow-external-sources)",
    # -- defines -----------------------------------------------------------------------------
    "CL050": "a Define value does not fit its type",
    "CL051": "a Define has no param, no default and no value in its name (defined empty)",
    "CL052": "a Define type is not int, float, int[] or float[]",
    # -- work sizes and shapes ---------------------------------------------------------------
    "CL060": "a formula does not parse",
    "CL061": "more than 3 work-size entries",
    "CL062": "local has a different number of entries than global",
    "CL063": "a Tensor shape formula has more than 4 entries (B,F,Y,X)",
    "CL064": "a shape formula on an input Tensor (ignored: inputs take the model's shape)",
    "CL065": "a constant work size is too large (an entry over 2**32-1, or over 2**40 in all)",
    # -- across layers and files -------------------------------------------------------------
    "CL070": "the same layer name is defined again; the later definition wins",
    # -- building (validate --compile) -------------------------------------------------------
    "CL080": "the OpenCL program does not build",
    "CL081": "the layer could not be prepared for building (shapes, defines, work sizes)",
    "CL082": "the OpenCL compiler warns about a program that builds (a warning)",
    "CL083": "the local work size cannot run on the device (or with the built kernel)",
    "CL084": "a kernel parameter cannot take what the descriptor binds to it (an output bound "
             "to a const or non-__global parameter, a tensor to a non-pointer)",
    "CL085": "the kernel needs half precision (cl_khr_fp16), which the device does not have",
    "CL086": "--check-bounds: the kernel wrote outside its tensors, or left output elements "
             "unwritten",
    "CL087": "--sanitize: Oclgrind found an invalid memory access (or another kernel error)",
    # -- the VPU dialect (type="MVCL", SPEC section 6) -----------------------------------------
    "CL100": "max-shaves is a VPU scheduling hint: accepted and not used (info)",
    "CL101": "a Source names a .bin (offline VPU binary): the .cl of the same name is used (info)",
    "CL102": "a Source names a .bin (offline VPU binary) and no .cl of the same name is next to it",
    "CL103": "a Parameters child has a type its element does not allow",
    "CL104": "an MVCL format is not BFYX, BYXF, YXFB, FYXB, FYX, YXF, BF or ANY",
    "CL105": "a Scalar source is neither a dimension (I.X ...), a number, nor an attribute name",
    "CL106": "a kernel has no Parameters or no WorkSizes, or has them both inside and beside it",
    "CL107": "stages are missing, duplicated, leave a gap, or are given twice for one kernel",
    "CL108": "two definitions of one MVCL layer have the same Where conditions (both would match)",
    "CL109": "the kernel's parameter list cannot be read from the sources",
    "CL110": "a kernel parameter is bound by nothing",
    "CL111": "an arg-name is not a parameter of the kernel",
    "CL112": "an arg-name is bound twice",
    "CL113": "a binding does not fit the kernel parameter's declaration (pointer, space, type)",
    "CL114": "an input_buffer is written by no output_buffer of an earlier stage",
    "CL115": "a Tensor or WorkSizes names a port the layer does not have, or ports leave a gap",
    "CL116": "validate --compile does not build MVCL layers yet (info; it builds them now) "
             "(retired)",
    "CL117": "validate --compile cannot choose a Where variant of an MVCL layer without "
             "attributes: give them with --param (info)",
    "CL118": "a kernel computes in half, and the device has no cl_khr_fp16",
    "CL119": "--check-bounds and --sanitize do not check MVCL layers yet: their kernels ran "
             "unchecked (a warning)",
}


def describe(code: str) -> str:
    """The one-line description of a code ('' for an unknown one)."""
    return CODES.get(code, "")
