/* helpers for scale_shift; __kernel void not_this_one( is only a comment */
inline float scale_one(float v, float w, float b) { return v * w + b; }
