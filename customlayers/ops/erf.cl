#ifndef CUSTOMLAYERS_ERF_CL
#define CUSTOMLAYERS_ERF_CL
// erf in float as a rational function of x (odd numerator of degree 13 over an even
// denominator of degree 8, on x clamped to [-4, 4], where erf is 1 to float precision): within
// 5e-7 of erf everywhere. PoCL's erf() is a scalar library call that cost 60 times a tanh()
// (8% of a ViT). The clamp is written with comparisons so that a NaN stays NaN.
inline float erf_rational(float x)
{
    x = x > 4.0f ? 4.0f : (x < -4.0f ? -4.0f : x);
    const float x2 = x * x;
    float p = fma(x2, -2.72614225801306e-10f, 2.77068142495902e-08f);
    p = fma(x2, p, -2.10102402082508e-06f);
    p = fma(x2, p, -5.69250639462346e-05f);
    p = fma(x2, p, -7.34990630326855e-04f);
    p = fma(x2, p, -2.95459980854025e-03f);
    p = fma(x2, p, -1.60960333262415e-02f);
    float q = fma(x2, -1.45660718464996e-05f, -2.13374055278905e-04f);
    q = fma(x2, q, -1.68282697438203e-03f);
    q = fma(x2, q, -7.37332916720468e-03f);
    q = fma(x2, q, -1.42647390514189e-02f);
    return x * p / q;
}
#endif
