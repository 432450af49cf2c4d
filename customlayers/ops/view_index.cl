// Where row `row` of a linear view starts (ops/_program.py: RowViews): `v` is the view as a
// small constant buffer, [outer rank, offset, step along a row, outer dims, outer strides]
// (axes merged where every view walks them contiguously, size-1 axes dropped), an argument so
// that one program serves every shape, permutation and broadcast. The row's elements follow
// at v[2] apart: a kernel divides once per run of a row, not once per element.
inline int view_row(__constant const int* restrict v, uint row)
{
    const int rank = v[0];
    int at = v[1];
    for (int k = rank - 1; k >= 0; --k) {
        const uint d = (uint)v[3 + k];
        at += (int)(row % d) * v[3 + rank + k];
        row /= d;
    }
    return at;
}
