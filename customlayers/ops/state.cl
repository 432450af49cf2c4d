// A model's state (OpenVINO's ReadValue/Assign, ops/tensor/state.py): a tensor of the request
// that lives on the device across inferences. Elements are copied as WORD, the unsigned integer
// of their size (the bits are moved, never converted), one work-item per element.
//
// Baked: WORD (uchar, ushort, uint or ulong), WITH_INIT (read_value: 1 when the ReadValue has an
// init input). Arguments: the element count, and for read_value `use_state`, which the request
// sets per run: 0 after a reset (the state is not yet written: the init, else zeros), else 1.

__kernel void read_value(__global const WORD* state,
#if WITH_INIT
                         __global const WORD* init,
#endif
                         __global WORD* out, uint count, int use_state)
{
    uint i = get_global_id(0);
    if (i >= count)
        return;
#if WITH_INIT
    out[i] = use_state ? state[i] : init[i];
#else
    out[i] = use_state ? state[i] : (WORD)0;
#endif
}

__kernel void assign(__global const WORD* in, __global WORD* state, uint count)
{
    uint i = get_global_id(0);
    if (i < count)
        state[i] = in[i];
}
