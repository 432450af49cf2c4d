"""What a built program and its kernels say of themselves, in plain Python values, so that the
rooms above the device (the layer catalog, the adapters) check a user's kernel without
importing OpenCL: the kernels a program has, a kernel made by name, how each parameter is
declared (address space, const, type; when the driver kept the argument info), the work-group
size the compiled kernel allows."""
from __future__ import annotations

from dataclasses import dataclass

import pyopencl as cl

# address spaces by the names OpenCL C spells them with
GLOBAL, CONSTANT, LOCAL, PRIVATE = "__global", "__constant", "__local", "__private"
_SPACES = {int(cl.kernel_arg_address_qualifier.GLOBAL): GLOBAL,
           int(cl.kernel_arg_address_qualifier.CONSTANT): CONSTANT,
           int(cl.kernel_arg_address_qualifier.LOCAL): LOCAL,
           int(cl.kernel_arg_address_qualifier.PRIVATE): PRIVATE}


@dataclass(frozen=True)
class ParamDeclaration:
    """How a kernel parameter is declared: `__global const float* x` is
    (GLOBAL, True, "float*", "x")."""
    address: str
    const: bool
    type_name: str
    name: str

    def describe(self) -> str:
        shown = [self.address] if self.address != PRIVATE else []
        shown.append(("const " if self.const else "") + self.type_name)
        return f"'{' '.join(shown)}'"


def kernel_names(program) -> list[str]:
    """The kernels a built program defines."""
    names = program.get_info(cl.program_info.KERNEL_NAMES) or ""
    return [n for n in names.split(";") if n]


def kernel_by_name(program, name: str):
    """The program's kernel `name`, or None when it has none of that name."""
    try:
        return cl.Kernel(program, name)
    except cl.Error:
        return None


def param_declaration(kernel, index: int) -> ParamDeclaration | None:
    """How parameter `index` of `kernel` is declared; None where the driver kept no argument
    info (built without -cl-kernel-arg-info on a driver that needs it)."""
    info = cl.kernel_arg_info
    try:
        address = int(kernel.get_arg_info(index, info.ADDRESS_QUALIFIER))
        qualifiers = int(kernel.get_arg_info(index, info.TYPE_QUALIFIER))
        type_name = kernel.get_arg_info(index, info.TYPE_NAME).strip()
        name = kernel.get_arg_info(index, info.NAME)
    except cl.Error:
        return None
    return ParamDeclaration(_SPACES.get(address, PRIVATE),
                            bool(qualifiers & cl.kernel_arg_type_qualifier.CONST),
                            type_name, name)


def kernel_work_group_limit(kernel, device) -> int:
    """The most work items per group the compiled kernel allows on `device` (registers and
    local memory may make it fewer than the device's own limit)."""
    return int(kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device))
