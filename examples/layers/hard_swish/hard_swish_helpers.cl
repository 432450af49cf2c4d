// Helpers shared by the kernel file that follows (sources are concatenated in order, after the
// generated defines, so these may use INPUT0_* and OUTPUT0_*).
#ifndef HSWISH_UPPER
#error "HSWISH_UPPER is set by the second CompilerOptions of hard_swish.xml"
#endif

inline float relu6(float v)
{
    return clamp(v, 0.0f, HSWISH_UPPER);
}

inline uint input0_index(uint b, uint f, uint y, uint x)
{
    return INPUT0_OFFSET + b * INPUT0_PITCHES[0] + f * INPUT0_PITCHES[1]
         + y * INPUT0_PITCHES[2] + x * INPUT0_PITCHES[3];
}

inline uint output0_index(uint b, uint f, uint y, uint x)
{
    return OUTPUT0_OFFSET + b * OUTPUT0_PITCHES[0] + f * OUTPUT0_PITCHES[1]
         + y * OUTPUT0_PITCHES[2] + x * OUTPUT0_PITCHES[3];
}
