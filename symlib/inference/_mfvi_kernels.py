"""The C routines of :mod:`symlib.inference.mfvi_batched`, and the torch passes they replace.

Two implementations:

- :class:`TorchKernels`: the element-wise passes of the layer-by-layer step as plain torch ops (any
  activation, any machine), each one pass over a ``(models, samples x points, units)`` tensor;
- :class:`CKernels`: :meth:`CKernels.network`, the whole likelihood and its gradient for SELU MLPs as
  one C routine, and :meth:`CKernels.normal`, a counter-based standard normal generator. Compiled once
  with the local ``g++`` (``-O3 -march=native``, GCC vector extensions: 16 floats per vector) into a
  per-user temporary folder and loaded with :mod:`ctypes`. Other activations use the torch passes.
  On a CPU with AVX but not AVX-512 the hot loops (the layer products and their epilogue, the weight
  gradients, the per-unit sums, the noise) run on 8-float vectors instead: GCC keeps a 16-float
  vector in memory where no register holds one, which made the routine slower there than
  :func:`symlib.inference.mfvi.fit`. Every lane does the same operations in the same order, so the
  numbers are those of the 16-float code on that CPU, bit for bit (the per-unit sums keep their
  16-lane order; the AVX-512 and pre-AVX code is unchanged).

:meth:`CKernels.network` works block by block: one model, one Monte Carlo sample and all ``n``
points go forward through every layer and back before the next block, so every activation stays in
the core's caches (a few hundred kB per block instead of 4 MB tensors per layer at chapter 1's paper
size). Inside a block the activations are stored unit-major (``X[unit][point]``, points padded to a
multiple of 16) so that each layer's two products -- means ``a W^T`` (plus a skip ``h O^T``) and
variances ``a^2 W_sigma2^T`` -- are register-tiled broadcast-and-FMA loops over the points, with the
element-wise work (``sd = sqrt(var + sigma_b^2)``, ``h = mu + b + sd eps``, ``eps / sd``, the next
layer's SELU) done on the tile while it is in registers; the weight gradients use a transposed copy
of the layer's input so that they too are broadcast-and-FMA loops. Arithmetic is float32 with
reordered sums and ``1/sqrt`` from the hardware estimate plus one Newton step with AVX-512 (else
correctly rounded), so the results equal torch's to float32 rounding, not bit for bit
(``tests/inference/test_mfvi_batched.py``).

The noise of a block comes either from tensors drawn by the caller (the same numbers as
:func:`symlib.inference.mfvi.sample_outputs` draws) or from the counter-based generator: SplitMix64's
mixing function (Steele, Lea & Flood, 2014) of a counter, turned into normals by Box-Muller with
polynomial ``log``, ``sin`` and ``cos`` (relative error ~1e-7). It gives standard normals in
distribution (tested: moments, Kolmogorov-Smirnov), not torch's numbers.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch
from torch import Tensor

from symlib.nn.mlp import Activation, activation_fn

__all__ = ["CKernels", "TorchKernels", "c_kernels"]

SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

_SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif
#if defined(__AVX__) && !defined(__AVX512F__) && !defined(SYMLIB_VECTOR16)
#define SYMLIB_V8 1     /* the hot loops on 8-float vectors (below); -DSYMLIB_VECTOR16 keeps 16 */
#endif
/* Feature-major blocks: X[unit][row], rows padded to Rp (a multiple of 16); GCC vector extensions (16 floats). */
#define SA 1.6732632423543772848170429916717f
#define SS 1.0507009873554804934193349852946f
#define R __restrict__
typedef float vf __attribute__((vector_size(64)));
#define VL 16

static inline vf ld(const float* p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf v) { memcpy(p, &v, sizeof v); }
typedef int32_t vi __attribute__((vector_size(64)));
typedef uint32_t vu __attribute__((vector_size(64)));
typedef uint64_t vu64 __attribute__((vector_size(64)));

/* The register tiles run on the machine's vectors: vf itself with AVX-512; elsewhere 8 floats, as
   GCC keeps a 64-byte vector in memory when no register holds one. A lane computes the same
   operations in the same order either way (the same numbers); the tiles are sized for 32 registers
   of 16 floats and for 16 of 8. */
typedef float vf8n __attribute__((vector_size(32)));
typedef int32_t vi8n __attribute__((vector_size(32)));
template <class V> struct VT;
template <> struct VT<vf> { enum { N = 16 }; typedef vi I; };
template <> struct VT<vf8n> { enum { N = 8 }; typedef vi8n I; };
#ifndef SYMLIB_V8
typedef vf vn;
#define RTW 4
#define WCT 4
#define WKV 2
#else
typedef vf8n vn;
#define RTW 2
#define WCT 2
#define WKV 2
#endif
#define VN ((int)VT<vn>::N)
template <class V> static inline V ldv(const float* p) { V v; memcpy(&v, p, sizeof v); return v; }
template <class V> static inline void stv(float* p, V v) { memcpy(p, &v, sizeof v); }

/* 1/sqrt(x), x > 0: with AVX-512, the hardware estimate and one Newton step (relative error ~1e-7);
   elsewhere the correctly rounded 1 / sqrt(x) */
static inline vf vrsqrt(vf x) {
#ifdef __AVX512F__
    vf y = (vf)_mm512_rsqrt14_ps((__m512)x);
#else
    vf y;
    for (int i = 0; i < VL; ++i) y[i] = 1.0f / sqrtf(x[i]);
    return y;
#endif
    return y * (1.5f - 0.5f * x * y * y);
}

#ifdef SYMLIB_V8
static inline vf8n vrsqrt(vf8n x) { return (vf8n)_mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sqrt_ps((__m256)x)); }
#endif

template <class I, class V> static inline V vselect(I m, V a, V b) { return m ? a : b; }

/* expm1(x) for x <= 0, branch-free: x = k ln2 + r, |r| <= ln2/2, expm1(x) = 2^k expm1(r) + (2^k - 1),
   expm1(r) by its Taylor polynomial to r^8 (relative error below 1e-7) */
template <class V> static inline V vexpm1_neg(V x) {
    typedef typename VT<V>::I I;
    x = vselect(x < -87.0f, V{} - 87.0f, x);
    V k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;     /* round to nearest */
    V r = x - k * 0.693145751953125f - k * 1.428606765330187045e-06f;
    V p = V{} + 2.48015873015873016e-05f;
    p = p * r + 1.98412698412698413e-04f;
    p = p * r + 1.38888888888888889e-03f;
    p = p * r + 8.33333333333333333e-03f;
    p = p * r + 4.16666666666666667e-02f;
    p = p * r + 1.66666666666666667e-01f;
    p = p * r + 0.5f;
    V em1 = r + r * r * p;
    V two_k = (V)((__builtin_convertvector(k, I) + 127) << 23);
    return two_k * em1 + (two_k - 1.0f);
}

template <class V> static inline V vselu(V x) {
    V neg = vexpm1_neg(vselect(x < 0.0f, x, V{})) * (SS * SA);
    return vselect(x > 0.0f, x * SS, neg);
}

/* log(u), u > 0 normal: u = 2^e m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh((m - 1)/(m + 1)) by its series
   to t^9 (relative error ~1e-7) */
template <class V> static inline V vlog(V u) {
    typedef typename VT<V>::I I;
    I b = (I)u;
    I e = ((b >> 23) & 0xff) - 127;
    V m = (V)((b & 0x7fffff) | 0x3f800000);
    I big = m > 1.41421356f;
    m = vselect(big, 0.5f * m, m);
    V ef = __builtin_convertvector(e - big, V);   /* big is -1 where true */
    V t = (m - 1.0f) / (m + 1.0f), t2 = t * t;
    V p = 1.0f + t2 * (0.333333333f + t2 * (0.2f + t2 * (0.142857143f + t2 * 0.111111111f)));
    return ef * 0.693147180559945f + 2.0f * t * p;
}

static inline vu64 vmix64(vu64 z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* count (a multiple of 32) normals: chunk q holds pairs p = 16q + t, t < 16, as out[32q + t] = r cos(theta),
   out[32q + 16 + t] = r sin(theta), r = sqrt(-2 log u1), theta = 2 pi u2, from z = mix64(seed + (p + 1) golden):
   u1 = (z >> 32) 2^-32 + 2^-33 in (0, 1), u2 = ((z mod 2^32) >> 8) 2^-24 in [0, 1) */
/* Box-Muller on vectors of type V (integer lanes I) from the pairs' bits hi (u1) and lo (u2): r cos(theta) to
   C, r sin(theta) to S (a macro, so that the AVX-512 routine compiles to the instructions it always did) */
#define BOX_MULLER(V, I, hi, lo, C, S)                                                                       \
    do {                                                                                                     \
        V u1 = __builtin_convertvector(hi, V) * 2.3283064365386963e-10f + 1.1641532182693481e-10f;           \
        V u2 = __builtin_convertvector(lo >> 8, V) * 5.9604644775390625e-08f;                                \
        V x = -2.0f * vlog(u1);                                                                              \
        x = vselect(x > 1e-30f, x, (V){} + 1e-30f);                                                          \
        V r = x * vrsqrt(x);                                                                                 \
        V v = 4.0f * u2;                                                                                     \
        I k = __builtin_convertvector(v, I);                                                                 \
        V al = (v - __builtin_convertvector(k, V) - 0.5f) * 1.57079632679489662f, a2 = al * al;              \
        V sa = al * (1.0f + a2 * (-1.66666667e-01f + a2 * (8.33333333e-03f + a2 * (-1.98412698e-04f + a2 * 2.75573192e-06f)))); \
        V ca = 1.0f + a2 * (-0.5f + a2 * (4.16666667e-02f + a2 * (-1.38888889e-03f + a2 * (2.48015873e-05f - a2 * 2.75573192e-07f)))); \
        V hv = (V){} + h;                                                                                    \
        V c0f = vselect((k == 1) | (k == 2), -hv, hv);                                                       \
        V s0f = vselect(k >= 2, -hv, hv);                                                                    \
        stv(C, r * (c0f * ca - s0f * sa));                                                                   \
        stv(S, r * (s0f * ca + c0f * sa));                                                                   \
    } while (0)

#ifndef SYMLIB_V8
static void normals32(float* R out, int64_t count, uint64_t seed) {
    const float h = 0.70710678118654752f;
    const vu64 lane = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int64_t q = 0; q < count / 32; ++q) {
        vu64 c0 = lane + (uint64_t)(16 * q), c1 = c0 + 8;
        vu z0 = (vu)vmix64(seed + c0 * 0x9E3779B97F4A7C15ull), z1 = (vu)vmix64(seed + c1 * 0x9E3779B97F4A7C15ull);
        vu hi = __builtin_shufflevector(z0, z1, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        vu lo = __builtin_shufflevector(z0, z1, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        BOX_MULLER(vf, vi, hi, lo, out + 32 * q, out + 32 * q + 16);
    }
}
#else
/* the same numbers with 8-float vectors: the pairs' counters mixed one by one, each chunk's 16 pairs as two
   halves of 8 */
typedef uint32_t vu8n __attribute__((vector_size(32)));
static void normals32(float* R out, int64_t count, uint64_t seed) {
    const float h = 0.70710678118654752f;
    for (int64_t q = 0; q < count / 32; ++q)
        for (int64_t half = 0; half < 2; ++half) {
            uint32_t hi[8], lo[8];
            for (int64_t t = 0; t < 8; ++t) {
                uint64_t z = mix64(seed + (uint64_t)(16 * q + 8 * half + t + 1) * 0x9E3779B97F4A7C15ull);
                hi[t] = (uint32_t)(z >> 32);
                lo[t] = (uint32_t)z;
            }
            vu8n vh, vl;
            memcpy(&vh, hi, sizeof vh);
            memcpy(&vl, lo, sizeof vl);
            BOX_MULLER(vf8n, vi8n, vh, vl, out + 32 * q + 8 * half, out + 32 * q + 16 + 8 * half);
        }
}
#endif

/* ---- products on feature-major blocks: X[unit][row], rows padded to Rp (a multiple of 16) ---- */

/* One layer l >= 2 on a tile of CT units x RT row vectors: mu[c] = sum_k W[c,k] A[k] (+ sum_k O[c,k] H[k]),
   var[c] = sum_k Wv[c,k] A2[k] (W, Wv, O: (N, K); A, A2, H: the previous layer's a, a^2, h), then the
   epilogue below on the tile while it is in registers */
struct FwdOut { const float *brow, *bvar, *E, *VALID; float *H, *ESD, *A, *A2; };

template <class V, int CT, int RT, bool SKIP, bool ACT>
static inline void fwd_tile(int64_t K, int64_t Rp, const float* R W, const float* R Wv, const float* R O,
                            const float* R A, const float* R A2, const float* R H, int64_t c0, int64_t r0,
                            const FwdOut& out) {
    const float* R brow = out.brow; const float* R bvar = out.bvar; const float* R E = out.E;
    const float* R VALID = out.VALID;
    float* R Hout = out.H; float* R ESD = out.ESD; float* R Aout = out.A; float* R A2out = out.A2;
    const int LN = VT<V>::N;
    V mu[CT][RT] = {}, var[CT][RT] = {};
    for (int64_t k = 0; k < K; ++k) {
        V a[RT], a2[RT], hv[RT];
        for (int j = 0; j < RT; ++j) {
            a[j] = ldv<V>(A + k * Rp + r0 + LN * j);
            a2[j] = ldv<V>(A2 + k * Rp + r0 + LN * j);
            if (SKIP) hv[j] = ldv<V>(H + k * Rp + r0 + LN * j);
        }
        for (int i = 0; i < CT; ++i) {
            float w = W[(c0 + i) * K + k], wv = Wv[(c0 + i) * K + k];
            float o = SKIP ? O[(c0 + i) * K + k] : 0.0f;
            for (int j = 0; j < RT; ++j) {
                mu[i][j] += a[j] * w;
                var[i][j] += a2[j] * wv;
                if (SKIP) mu[i][j] += hv[j] * o;
            }
        }
    }
    /* epilogue: sd = sqrt(var + bvar), h = mu + brow + sd eps, esd = eps / sd (0 on padded rows),
       and for hidden layers the next layer's a = selu(h), a2 = a^2 */
    for (int i = 0; i < CT; ++i) {
        int64_t c = c0 + i;
        float b = brow[c], bv = bvar[c];
        for (int j = 0; j < RT; ++j) {
            int64_t at = c * Rp + r0 + LN * j;
            V va = var[i][j] + bv;
            va = vselect(va > 1e-37f, va, V{} + 1e-37f);
            V inv = vrsqrt(va);
            V e = ldv<V>(E + at);
            V h = mu[i][j] + b + (va * inv) * e;
            stv(Hout + at, h);
            stv(ESD + at, e * inv * ldv<V>(VALID + r0 + LN * j));
            if (ACT) {
                V a = vselu(h);
                stv(Aout + at, a);
                stv(A2out + at, a * a);
            }
        }
    }
}

template <bool SKIP, bool ACT>
static void fwd(int64_t N, int64_t K, int64_t Rp, const float* W, const float* Wv, const float* O,
                const float* A, const float* A2, const float* H, const FwdOut& out) {
    int64_t nv = Rp / VN, j = 0;
    for (; j + RTW <= nv; j += RTW) {
        int64_t c = 0;
        for (; c + 2 <= N; c += 2) fwd_tile<vn, 2, RTW, SKIP, ACT>(K, Rp, W, Wv, O, A, A2, H, c, VN * j, out);
        for (; c < N; ++c) fwd_tile<vn, 1, RTW, SKIP, ACT>(K, Rp, W, Wv, O, A, A2, H, c, VN * j, out);
    }
    for (; j < nv; ++j) {
        int64_t c = 0;
        for (; c + 2 <= N; c += 2) fwd_tile<vn, 2, 1, SKIP, ACT>(K, Rp, W, Wv, O, A, A2, H, c, VN * j, out);
        for (; c < N; ++c) fwd_tile<vn, 1, 1, SKIP, ACT>(K, Rp, W, Wv, O, A, A2, H, c, VN * j, out);
    }
}

/* GP[k] = f'(A[k]) (sum_c W[c,k] G[c] + A[k] sum_c Wv[c,k] GV[c]) + sum_c O[c,k] G[c]  (SELU: f' from a) */
template <class V, int KT, int RT, bool SKIP>
static inline void bwd_tile(int64_t N, int64_t K, int64_t Rp, const float* R W, const float* R Wv, const float* R O,
                            const float* R G, const float* R GV, const float* R A, int64_t k0, int64_t r0, float* R GP) {
    const int LN = VT<V>::N;
    V tm[KT][RT] = {}, tv[KT][RT] = {}, ts[KT][RT] = {};
    for (int64_t c = 0; c < N; ++c) {
        V g[RT], gv[RT];
        for (int j = 0; j < RT; ++j) { g[j] = ldv<V>(G + c * Rp + r0 + LN * j); gv[j] = ldv<V>(GV + c * Rp + r0 + LN * j); }
        for (int i = 0; i < KT; ++i) {
            float w = W[c * K + k0 + i], wv = Wv[c * K + k0 + i];
            float o = SKIP ? O[c * K + k0 + i] : 0.0f;
            for (int j = 0; j < RT; ++j) {
                tm[i][j] += g[j] * w;
                tv[i][j] += gv[j] * wv;
                if (SKIP) ts[i][j] += g[j] * o;
            }
        }
    }
    const V ss = V{} + SS, ssa = V{} + SS * SA;
    for (int i = 0; i < KT; ++i)
        for (int j = 0; j < RT; ++j) {
            int64_t at = (k0 + i) * Rp + r0 + LN * j;
            V a = ldv<V>(A + at);
            V d = a > 0.0f ? ss : a + ssa;
            V out = (tm[i][j] + a * tv[i][j]) * d;
            if (SKIP) out += ts[i][j];
            stv(GP + at, out);
        }
}

template <bool SKIP>
static void bwd(int64_t N, int64_t K, int64_t Rp, const float* W, const float* Wv, const float* O,
                const float* G, const float* GV, const float* A, float* GP) {
    int64_t nv = Rp / VN, j = 0;
    for (; j + RTW <= nv; j += RTW) {
        int64_t k = 0;
        for (; k + 2 <= K; k += 2) bwd_tile<vn, 2, RTW, SKIP>(N, K, Rp, W, Wv, O, G, GV, A, k, VN * j, GP);
        for (; k < K; ++k) bwd_tile<vn, 1, RTW, SKIP>(N, K, Rp, W, Wv, O, G, GV, A, k, VN * j, GP);
    }
    for (; j < nv; ++j) {
        int64_t k = 0;
        for (; k + 2 <= K; k += 2) bwd_tile<vn, 2, 1, SKIP>(N, K, Rp, W, Wv, O, G, GV, A, k, VN * j, GP);
        for (; k < K; ++k) bwd_tile<vn, 1, 1, SKIP>(N, K, Rp, W, Wv, O, G, GV, A, k, VN * j, GP);
    }
}

#define TLO8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define THI8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define TLO4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define THI4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define TLO2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define THI2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define TLO1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define THI1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31

/* T (Rp, Kp), row-major, = A (K, Rp)^T, zero for k >= K; Rp and Kp multiples of 16 */
#ifdef SYMLIB_V8
static void transpose(const float* R A, int64_t K, int64_t Rp, float* R T, int64_t Kp) {
    for (int64_t r = 0; r < Rp; ++r) {
        float* R t = T + r * Kp;
        for (int64_t k = 0; k < K; ++k) t[k] = A[k * Rp + r];
        for (int64_t k = K; k < Kp; ++k) t[k] = 0.0f;
    }
}
#else
static void transpose(const float* R A, int64_t K, int64_t Rp, float* R T, int64_t Kp) {
    for (int64_t kb = 0; kb < Kp; kb += VL)
        for (int64_t rb = 0; rb < Rp; rb += VL) {
            vf v[16];
            for (int i = 0; i < 16; ++i) v[i] = kb + i < K ? ld(A + (kb + i) * Rp + rb) : (vf){};
#define STAGE(h)                                                                             \
            for (int i = 0; i < 16; ++i)                                                     \
                if ((i / h) % 2 == 0) {                                                      \
                    vf a = v[i], b = v[i + h];                                               \
                    v[i] = __builtin_shufflevector(a, b, TLO##h);                            \
                    v[i + h] = __builtin_shufflevector(a, b, THI##h);                        \
                }
            STAGE(8) STAGE(4) STAGE(2) STAGE(1)
#undef STAGE
            for (int i = 0; i < 16; ++i) st(T + (rb + i) * Kp + kb, v[i]);
        }
}
#endif

/* DW[c, :] += sum_r G[c, r] T[r, :],  DV[c, :] += sum_r GV[c, r] T[r, :]^2  (DW, DV: (N, Kp)) */
template <class V, int CT, int KV>
static inline void wgrad_tile(int64_t Kp, int64_t Rp, int64_t n, const float* R G, const float* R GV,
                              const float* R T, int64_t c0, int64_t kv0, float* R DW, float* R DV) {
    const int LN = VT<V>::N;
    V aw[CT][KV] = {}, av[CT][KV] = {};
    for (int64_t r = 0; r < n; ++r) {
        V t[KV], t2[KV];
        for (int v = 0; v < KV; ++v) { t[v] = ldv<V>(T + r * Kp + LN * (kv0 + v)); t2[v] = t[v] * t[v]; }
        for (int i = 0; i < CT; ++i) {
            float g = G[(c0 + i) * Rp + r], gv = GV[(c0 + i) * Rp + r];
            for (int v = 0; v < KV; ++v) { aw[i][v] += t[v] * g; av[i][v] += t2[v] * gv; }
        }
    }
    for (int i = 0; i < CT; ++i)
        for (int v = 0; v < KV; ++v) {
            float* pw = DW + (c0 + i) * Kp + LN * (kv0 + v);
            float* pv = DV + (c0 + i) * Kp + LN * (kv0 + v);
            stv(pw, ldv<V>(pw) + aw[i][v]);
            stv(pv, ldv<V>(pv) + av[i][v]);
        }
}

static void wgrad(int64_t N, int64_t Kp, int64_t Rp, int64_t n, const float* G, const float* GV, const float* T,
                  float* DW, float* DV) {
    int64_t nkv = Kp / VN, kv = 0;
    for (; kv + WKV <= nkv; kv += WKV) {
        int64_t c = 0;
        for (; c + WCT <= N; c += WCT) wgrad_tile<vn, WCT, WKV>(Kp, Rp, n, G, GV, T, c, kv, DW, DV);
        for (; c < N; ++c) wgrad_tile<vn, 1, WKV>(Kp, Rp, n, G, GV, T, c, kv, DW, DV);
    }
    for (; kv < nkv; ++kv) {
        int64_t c = 0;
        for (; c + WCT <= N; c += WCT) wgrad_tile<vn, WCT, 1>(Kp, Rp, n, G, GV, T, c, kv, DW, DV);
        for (; c < N; ++c) wgrad_tile<vn, 1, 1>(Kp, Rp, n, G, GV, T, c, kv, DW, DV);
    }
}

typedef float vf8 __attribute__((vector_size(32)));
typedef float vf4 __attribute__((vector_size(16)));
/* the sum of the 16 lanes */
static inline float hsum(vf v) {
    vf8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) + __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    vf4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
    return (b[0] + b[2]) + (b[1] + b[3]);
}

#ifdef SYMLIB_V8
/* the sum of a 16-lane accumulator held as two vectors of 8 (lanes 0-7 and 8-15), in hsum's order */
#define NH 2
static inline float hsumn(const vn* v) {
    vf8n a = v[0] + v[1];
    vf4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
    return (b[0] + b[2]) + (b[1] + b[3]);
}
#endif

static float* alloc(int64_t count) {
    int64_t bytes = ((count * 4 + 63) / 64) * 64;
    float* p = (float*)aligned_alloc(64, bytes > 0 ? bytes : 64);
    memset(p, 0, bytes > 0 ? bytes : 64);
    return p;
}

enum { T_WM, T_WV, T_SK, T_SKM, T_BROW, T_BVAR, T_EPS, T_DWM, T_DWV, T_DBROW, T_DBVAR, T_N };

extern "C" {

/* The local-reparameterisation likelihood of M SELU MLPs and its gradient, block by block (one block: one
   model, one Monte Carlo sample, all n points, through every layer and back; layers 1 <= L <= 63).
   tab[f * (L + 1) + l]: the address of field f (enum above) of layer l:
     WM, WV (M, N, K): weight means and variances; SK (M, N, K): skips O_l or 0; SKM (M, int8): model has the skip;
     BROW (M, S, N): bias row of each sample (mean, or the ordered draw); BVAR (M, N), l >= 2: bias variance;
     EPS (M, S, n, N): the noise when not fast; outputs DWM, DWV (M, N, K): dL/dW, dL/dWv; DBROW (M, S, N);
     DBVAR (M, N). Layer 1 comes as mu1T, sd1T (M, N_1, n) (its moments from x), with outputs dmu1T, dsd1T.
   L = -(1/n) sum_m (1/S) sum_{s,i} log N(y_i; f, sigma_m^2) up to the constant: g = dL/df = scale (y - f) / sigma^2
   with scale = -1/(S n); sq_out[m] = sum_{s,i} (y_i - f)^2 / sigma_m^2. fast: noise from the counter-based
   stream of block (m, s) and layer l, seed mix64(key + (((m S + s) L + l - 1) + 1) 0xD1B54A32D192ED03), laid
   out unit-major over rows padded to Rp = 16 ceil(n / 16) (normals32). */
void net_grad(int64_t M, int64_t S, int64_t n, int64_t L, const int64_t* widths, const int64_t* tab,
              const float* mu1T, const float* sd1T, float* dmu1T, float* dsd1T,
              const float* y, const float* inv_var, float scale, uint64_t key, int fast, float* sq_out) {
#define TAB(f, l) (tab[(f) * (L + 1) + (l)])
#define PF(f, l) ((float*)(intptr_t)TAB(f, l))
    if (L < 1 || L > 63) return;
    int64_t Rp = (n + VL - 1) / VL * VL;
    float *H[64], *A[64], *A2[64], *E[64], *ESD[64], *VW[64], *VWv[64];
    int64_t maxw = 1;
    for (int64_t l = 0; l <= L; ++l) maxw = widths[l] > maxw ? widths[l] : maxw;
    for (int64_t l = 1; l <= L; ++l) {
        int64_t N = widths[l], K = widths[l - 1];
        H[l] = alloc(N * Rp); A[l] = alloc(N * Rp); A2[l] = alloc(N * Rp);
        E[l] = alloc((N * Rp + 31) / 32 * 32); ESD[l] = alloc(N * Rp);
        VW[l] = l >= 2 ? alloc(N * ((K + VL - 1) / VL * VL)) : 0; VWv[l] = l >= 2 ? alloc(N * ((K + VL - 1) / VL * VL)) : 0;
    }
    float *G = alloc(maxw * Rp), *GP = alloc(maxw * Rp), *GV = alloc(maxw * Rp), *T = alloc(Rp * ((maxw + VL - 1) / VL * VL));
    float* YP = alloc(widths[L] * Rp);
    float* VALID = alloc(Rp);
    for (int64_t r = 0; r < n; ++r) VALID[r] = 1.0f;
    for (int64_t c = 0; c < widths[L]; ++c)
        for (int64_t r = 0; r < n; ++r) YP[c * Rp + r] = y[r * widths[L] + c];
    memset(dmu1T, 0, sizeof(float) * M * widths[1] * n);
    memset(dsd1T, 0, sizeof(float) * M * widths[1] * n);
    for (int64_t l = 2; l <= L; ++l) memset(PF(T_DBVAR, l), 0, sizeof(float) * M * widths[l]);
    for (int64_t m = 0; m < M; ++m) {
        double sq = 0.0;
        for (int64_t l = 2; l <= L; ++l) {
            int64_t Kp = (widths[l - 1] + VL - 1) / VL * VL;
            memset(VW[l], 0, sizeof(float) * widths[l] * Kp);
            memset(VWv[l], 0, sizeof(float) * widths[l] * Kp);
        }
        for (int64_t s = 0; s < S; ++s) {
            /* noise of every layer */
            for (int64_t l = 1; l <= L; ++l) {
                int64_t N = widths[l];
                if (fast) {
                    uint64_t bl = (uint64_t)((m * S + s) * L + (l - 1));
                    normals32(E[l], (N * Rp + 31) / 32 * 32, mix64(key + (bl + 1) * 0xD1B54A32D192ED03ull));
                } else {
                    const float* eps = PF(T_EPS, l) + (m * S + s) * n * N;
                    for (int64_t c = 0; c < N; ++c)
                        for (int64_t r = 0; r < n; ++r) E[l][c * Rp + r] = eps[r * N + c];
                }
                for (int64_t c = 0; c < N; ++c)
                    for (int64_t r = n; r < Rp; ++r) E[l][c * Rp + r] = 0.0f;
            }
            /* layer 1: h = mu1 + brow + sd1 eps */
            {
                int64_t N = widths[1];
                const float* br = PF(T_BROW, 1) + (m * S + s) * N;
                for (int64_t c = 0; c < N; ++c) {
                    const float* mr = mu1T + (m * N + c) * n;
                    const float* sr = sd1T + (m * N + c) * n;
                    float* h = H[1] + c * Rp; float* a = A[1] + c * Rp; float* a2 = A2[1] + c * Rp;
                    const float* e = E[1] + c * Rp;
                    float b = br[c];
                    for (int64_t r = 0; r < n; ++r) h[r] = (mr[r] + b) + sr[r] * e[r];
                    for (int64_t r = n; r < Rp; ++r) h[r] = 0.0f;
                    if (L > 1)
                        for (int64_t r = 0; r < Rp; r += VN) { vn v = vselu(ldv<vn>(h + r)); stv(a + r, v); stv(a2 + r, v * v); }
                }
            }
            /* layers 2..L */
            for (int64_t l = 2; l <= L; ++l) {
                int64_t N = widths[l], K = widths[l - 1];
                const float* W = PF(T_WM, l) + m * N * K;
                const float* Wv = PF(T_WV, l) + m * N * K;
                const int8_t* skm = (const int8_t*)(intptr_t)TAB(T_SKM, l);
                bool skip = skm && skm[m];
                const float* O = skip ? PF(T_SK, l) + m * N * K : 0;
                FwdOut fo = {PF(T_BROW, l) + (m * S + s) * N, PF(T_BVAR, l) + m * N, E[l], VALID,
                             H[l], ESD[l], l < L ? A[l] : 0, l < L ? A2[l] : 0};
                if (l < L) {
                    if (skip) fwd<true, true>(N, K, Rp, W, Wv, O, A[l - 1], A2[l - 1], H[l - 1], fo);
                    else fwd<false, true>(N, K, Rp, W, Wv, O, A[l - 1], A2[l - 1], H[l - 1], fo);
                } else {
                    if (skip) fwd<true, false>(N, K, Rp, W, Wv, O, A[l - 1], A2[l - 1], H[l - 1], fo);
                    else fwd<false, false>(N, K, Rp, W, Wv, O, A[l - 1], A2[l - 1], H[l - 1], fo);
                }
            }
            /* output: squared residuals and dL/df */
            {
                int64_t N = widths[L];
                float iv = inv_var[m];
                for (int64_t c = 0; c < N; ++c) {
                    const float* f = H[L] + c * Rp;
                    const float* yc = YP + c * Rp;
                    float* g = G + c * Rp;
#ifndef SYMLIB_V8
                    vf acc = {};
                    for (int64_t r = 0; r < Rp; r += VL) {
                        vf res = (ld(yc + r) - ld(f + r)) * ld(VALID + r);     /* 0 on padded rows */
                        acc += res * res * iv;
                        st(g + r, res * (scale * iv));
                    }
                    sq += hsum(acc);
#else
                    vn acc[NH] = {};
                    for (int64_t r = 0; r < Rp; r += VL)
                        for (int u = 0; u < NH; ++u) {
                            int64_t ru = r + VN * u;
                            vn res = (ldv<vn>(yc + ru) - ldv<vn>(f + ru)) * ldv<vn>(VALID + ru);     /* 0 on padded rows */
                            acc[u] += res * res * iv;
                            stv(g + ru, res * (scale * iv));
                        }
                    sq += hsumn(acc);
#endif
                }
            }
            /* backward, layers L..2 */
            for (int64_t l = L; l >= 2; --l) {
                int64_t N = widths[l], K = widths[l - 1];
                float* dbrow = PF(T_DBROW, l) + (m * S + s) * N;
                float* dbvar = PF(T_DBVAR, l) + m * N;
                for (int64_t c = 0; c < N; ++c) {
                    const float* g = G + c * Rp; const float* esd = ESD[l] + c * Rp; float* gv = GV + c * Rp;
#ifndef SYMLIB_V8
                    vf sg = {}, sv = {};
                    for (int64_t r = 0; r < Rp; r += VL) {
                        vf gg = ld(g + r), v = gg * ld(esd + r);
                        st(gv + r, v);
                        sg += gg;
                        sv += v;
                    }
                    dbrow[c] = hsum(sg);
                    dbvar[c] += 0.5f * hsum(sv);
#else
                    vn sg[NH] = {}, sv[NH] = {};
                    for (int64_t r = 0; r < Rp; r += VL)
                        for (int u = 0; u < NH; ++u) {
                            int64_t ru = r + VN * u;
                            vn gg = ldv<vn>(g + ru), v = gg * ldv<vn>(esd + ru);
                            stv(gv + ru, v);
                            sg[u] += gg;
                            sv[u] += v;
                        }
                    dbrow[c] = hsumn(sg);
                    dbvar[c] += 0.5f * hsumn(sv);
#endif
                }
                int64_t Kp = (K + VL - 1) / VL * VL;
                transpose(A[l - 1], K, Rp, T, Kp);
                wgrad(N, Kp, Rp, n, G, GV, T, VW[l], VWv[l]);
                const float* W = PF(T_WM, l) + m * N * K;
                const float* Wv = PF(T_WV, l) + m * N * K;
                const int8_t* skm = (const int8_t*)(intptr_t)TAB(T_SKM, l);
                bool skip = skm && skm[m];
                const float* O = skip ? PF(T_SK, l) + m * N * K : 0;
                if (skip) bwd<true>(N, K, Rp, W, Wv, O, G, GV, A[l - 1], GP);
                else bwd<false>(N, K, Rp, W, Wv, O, G, GV, A[l - 1], GP);
                float* t = G; G = GP; GP = t;
            }
            /* layer 1 */
            {
                int64_t N = widths[1];
                float* dbrow = PF(T_DBROW, 1) + (m * S + s) * N;
                for (int64_t c = 0; c < N; ++c) {
                    const float* g = G + c * Rp; const float* e = E[1] + c * Rp;
                    float* dm = dmu1T + (m * N + c) * n; float* ds = dsd1T + (m * N + c) * n;
#ifndef SYMLIB_V8
                    vf sg = {};
                    for (int64_t r = 0; r < n; ++r) { dm[r] += g[r]; ds[r] += g[r] * e[r]; }
                    for (int64_t r = 0; r < Rp; r += VL) sg += ld(g + r);
                    dbrow[c] = hsum(sg);
#else
                    vn sg[NH] = {};
                    for (int64_t r = 0; r < n; ++r) { dm[r] += g[r]; ds[r] += g[r] * e[r]; }
                    for (int64_t r = 0; r < Rp; r += VL)
                        for (int u = 0; u < NH; ++u) sg[u] += ldv<vn>(g + r + VN * u);
                    dbrow[c] = hsumn(sg);
#endif
                }
            }
        }
        for (int64_t l = 2; l <= L; ++l) {
            int64_t N = widths[l], K = widths[l - 1];
            float* dw = PF(T_DWM, l) + m * N * K;
            float* dwv = PF(T_DWV, l) + m * N * K;
            int64_t Kp = (K + VL - 1) / VL * VL;
            for (int64_t c = 0; c < N; ++c)
                for (int64_t k = 0; k < K; ++k) {
                    dw[c * K + k] = VW[l][c * Kp + k];
                    dwv[c * K + k] = 0.5f * VWv[l][c * Kp + k];
                }
        }
        sq_out[m] = (float)sq;
    }
    for (int64_t l = 1; l <= L; ++l) { free(H[l]); free(A[l]); free(A2[l]); free(E[l]); free(ESD[l]); free(VW[l]); free(VWv[l]); }
    free(YP); free(VALID); free(G); free(GP); free(GV); free(T);
#undef TAB
#undef PF
}

/* count (a multiple of 32) normals of the stream keyed by key (normals32 with seed mix64(key)) */
void normal_fill(float* out, int64_t count, uint64_t key) { normals32(out, count, mix64(key)); }

}
"""

_FLAGS = ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fPIC", "-shared", "-std=c++17"]


class TorchKernels:
    """The fused passes as plain torch ops (the reference, and the fallback)."""

    name = "torch"

    def __init__(self, activation: Activation):
        self.activation = Activation(activation)
        self._f = activation_fn(self.activation)

    def act_fwd(self, h: Tensor, a: Tensor, a2: Tensor) -> None:
        """``a = f(h)``, ``a2 = a^2``."""
        a.copy_(self._f(h))
        torch.mul(a, a, out=a2)

    def act_bwd(self, h: Tensor, a: Tensor, tmu: Tensor, tvar: Tensor) -> None:
        """``tmu <- f'(h) (tmu + a tvar)``."""
        tmu.addcmul_(a, tvar)
        act = self.activation
        if act is Activation.SELU:
            tmu.copy_(torch.ops.aten.elu_backward(tmu, SELU_ALPHA, SELU_SCALE, 1.0, False, h))
        elif act is Activation.RELU:
            tmu.copy_(torch.ops.aten.threshold_backward(tmu, a, 0))
        elif act is Activation.TANH:
            tmu.copy_(torch.ops.aten.tanh_backward(tmu, a))

    def out_fwd(self, mu: Tensor, var: Tensor, brow: Tensor, bvar: Tensor, eps: Tensor,
                a: Tensor | None = None, a2: Tensor | None = None) -> None:
        """``mu (M,S,n,N) += brow (M,S,N) + sqrt(var + bvar (M,N)) eps``; ``var <- sd``; then, if
        ``a`` is given, the next layer's ``a = f(mu)``, ``a2 = a^2``."""
        var.add_(bvar[:, None, None, :]).sqrt_()
        mu.add_(brow[:, :, None, :]).addcmul_(var, eps)
        if a is not None:
            self.act_fwd(mu, a.view_as(mu), a2.view_as(mu))

    def first_fwd(self, out: Tensor, mu1: Tensor, sd1: Tensor, brow: Tensor, eps: Tensor,
                  a: Tensor | None = None, a2: Tensor | None = None) -> None:
        """``out (M,S,n,N) = mu1 (M,n,N) + brow (M,S,N) + sd1 eps``; ``a``, ``a2`` as :meth:`out_fwd`."""
        torch.add(mu1[:, None], brow[:, :, None, :], out=out)
        out.addcmul_(sd1[:, None], eps)
        if a is not None:
            self.act_fwd(out, a.view_as(out), a2.view_as(out))

    def grad_var(self, g: Tensor, eps: Tensor, sd: Tensor, gv: Tensor, dbrow: Tensor, dbvar: Tensor) -> None:
        """``gv = g eps / sd``; ``dbrow = sum_i g`` (M,S,N); ``dbvar = sum_{s,i} gv / 2`` (M,N)."""
        torch.mul(g, eps, out=gv).div_(sd)
        dbrow.copy_(g.sum(2))
        dbvar.copy_(gv.sum((1, 2)).mul_(0.5))

    def first_bwd(self, g: Tensor, eps: Tensor, dmu1: Tensor, dsd1: Tensor, dbrow: Tensor) -> None:
        """``dmu1 = sum_s g``, ``dsd1 = sum_s g eps`` (M,n,N); ``dbrow = sum_i g`` (M,S,N)."""
        dmu1.copy_(g.sum(1))
        dsd1.copy_((g * eps).sum(1))
        dbrow.copy_(g.sum(2))


_FIELDS = ("wm", "wv", "skip", "skip_mask", "brow", "bvar", "eps", "dwm", "dwv", "dbrow", "dbvar")
"""The rows of :meth:`CKernels.network`'s address table, in the C routine's order."""


class CKernels(TorchKernels):
    """The C routines (SELU networks; other activations use the torch passes)."""

    name = "c"

    def __init__(self, activation: Activation, lib: ctypes.CDLL):
        super().__init__(activation)
        self._lib = lib

    @staticmethod
    def _p(t: Tensor | None) -> int:
        if t is None:
            return 0
        assert t.device.type == "cpu" and t.is_contiguous() and t.dtype in (torch.float32, torch.int8, torch.int64)
        return t.data_ptr()

    def normal(self, count: int, key: int) -> Tensor:
        """``count`` standard normals of the counter-based stream keyed by ``key`` (``0 <= key < 2^64``).

        Pair ``p`` of the stream is ``z = mix64(mix64(key) + (p + 1) * 0x9E3779B97F4A7C15)``, giving
        ``u1 = (z >> 32) 2^-32 + 2^-33`` and ``u2 = ((z mod 2^32) >> 8) 2^-24`` and, by Box-Muller, the
        normals ``r cos(2 pi u2)`` at ``32 q + t`` and ``r sin(2 pi u2)`` at ``32 q + 16 + t``
        (``p = 16 q + t``, ``r = sqrt(-2 log u1)``).
        """
        out = torch.empty((count + 31) // 32 * 32, dtype=torch.float32)
        self._lib.normal_fill(ctypes.c_void_p(out.data_ptr()), ctypes.c_int64(out.numel()), ctypes.c_uint64(key))
        return out[:count]

    def network(self, widths: tuple[int, ...], layers: dict[str, dict[int, Tensor | None]], mu1t: Tensor,
                sd1t: Tensor, y: Tensor, log_noise: Tensor, n_samples: int, *, key: int | None = None
                ) -> tuple[Tensor, dict[str, Tensor | dict[int, Tensor]]]:
        """The Monte Carlo likelihood of ``M`` SELU MLPs by the local reparameterisation trick, and its gradient.

        With ``f`` the output of sample ``s`` at point ``i`` and ``L = -(1/n) sum_m (1/S) sum_{s,i}
        log N(y_i; f, sigma_m^2)`` (what the step minimises, without the KL), the routine returns
        ``sq[m] = sum_{s,i} (y_i - f)^2 / sigma_m^2`` and the gradients of ``L`` w.r.t. the inputs below.

        Args:
            widths: ``(N_0, ..., N_L)``.
            layers: per field, per layer ``l``: ``wm``, ``wv`` (``l >= 2``, ``(M, N_l, N_{l-1})``: weight
                means and variances), ``skip`` (``O_l``, same shape, or None) and ``skip_mask`` (int8
                ``(M,)``: the models whose skip is not zero), ``brow`` (``(M, S, N_l)``: the bias each
                sample adds), ``bvar`` (``l >= 2``, ``(M, N_l)``: the bias variance) and, unless ``key``
                is given, ``eps`` (``(M, S, n, N_l)``: the noise).
            mu1t, sd1t: layer 1's mean and sd without the bias, ``(M, N_1, n)``.
            y: targets ``(n, N_L)``.
            log_noise: ``log sigma`` per model ``(M,)``.
            n_samples: ``S``.
            key: draw the noise from the counter-based generator keyed by ``key`` (:meth:`normal`'s
                stream with a seed per model, sample and layer) instead of ``eps``.

        Returns:
            ``sq`` ``(M,)`` and the gradients: ``wm``, ``wv``, ``bvar`` (per layer ``l >= 2``), ``brow``
            (per layer), ``mu1t``, ``sd1t``.
        """
        m, n, n_layers = mu1t.shape[0], mu1t.shape[-1], len(widths) - 1
        table = torch.zeros(len(_FIELDS), n_layers + 1, dtype=torch.int64)
        keep, grads = [], {"wm": {}, "wv": {}, "bvar": {}, "brow": {}}
        for l in range(1, n_layers + 1):
            n_out, n_in = widths[l], widths[l - 1]
            row = {f: layers.get(f, {}).get(l) for f in ("wm", "wv", "skip", "skip_mask", "brow", "bvar", "eps")}
            if key is not None:
                row["eps"] = None
            out = {"dbrow": torch.empty(m, n_samples, n_out)}
            grads["brow"][l] = out["dbrow"]
            if l >= 2:
                out.update(dwm=torch.empty(m, n_out, n_in), dwv=torch.empty(m, n_out, n_in), dbvar=torch.empty(m, n_out))
                grads["wm"][l], grads["wv"][l], grads["bvar"][l] = out["dwm"], out["dwv"], out["dbvar"]
            for f, t in {**row, **out}.items():
                if t is not None:
                    t = t.contiguous()
                    keep.append(t)
                    table[_FIELDS.index(f), l] = self._p(t)
        mu1t, sd1t, y = mu1t.contiguous(), sd1t.contiguous(), y.contiguous()
        inv_var = torch.exp(-2.0 * log_noise).contiguous()
        widths_t = torch.tensor(widths, dtype=torch.int64)
        dmu1t, dsd1t, sq = torch.empty_like(mu1t), torch.empty_like(sd1t), torch.empty(m)
        p = ctypes.c_void_p
        self._lib.net_grad(
            ctypes.c_int64(m), ctypes.c_int64(n_samples), ctypes.c_int64(n), ctypes.c_int64(n_layers),
            p(self._p(widths_t)), p(self._p(table)), p(self._p(mu1t)), p(self._p(sd1t)), p(self._p(dmu1t)),
            p(self._p(dsd1t)), p(self._p(y)), p(self._p(inv_var)), ctypes.c_float(-1.0 / (n_samples * n)),
            ctypes.c_uint64(0 if key is None else key), ctypes.c_int(key is not None), p(self._p(sq)))
        del keep
        return sq, {**grads, "mu1t": dmu1t, "sd1t": dsd1t}


_LIB: ctypes.CDLL | None = None
_LIB_ERROR: str | None = None


def _cpu_tag() -> str:
    """The CPU model and flags: ``-march=native`` code is only valid on the CPU it was built for."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags"))][:2]
    except OSError:
        lines = [platform.processor()]
    return "".join(lines)


def _load(extra_flags: tuple[str, ...] = ()) -> ctypes.CDLL:
    """Compile (once per source, flags and CPU) and load the C routines; ``extra_flags`` are added to
    the compiler's (a test builds the 16-float loops with ``-DSYMLIB_VECTOR16``)."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise RuntimeError("no C++ compiler (g++) on PATH")
    flags = [*_FLAGS, *extra_flags]
    key = hashlib.sha256("\0".join([_SOURCE, " ".join(flags), _cpu_tag(), platform.machine()]).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"symlib-kernels-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    folder.mkdir(parents=True, exist_ok=True)
    lib_path = folder / f"mfvi_{key}.so"
    if not lib_path.is_file():
        # build under a private name, then rename: a concurrent build never leaves a half-written .so
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            src = Path(tmp) / "mfvi.cpp"
            src.write_text(_SOURCE)
            out = Path(tmp) / "mfvi.so"
            proc = subprocess.run([cxx, *flags, str(src), "-o", str(out)], capture_output=True, text=True,
                                  check=False, timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"g++ failed: {proc.stderr[-2000:]}")
            os.replace(out, lib_path)
    lib = ctypes.CDLL(str(lib_path))
    for name in ("net_grad", "normal_fill"):
        getattr(lib, name).restype = None
    return lib


def c_kernels(activation: Activation) -> CKernels:
    """The C routines, compiled on first use.

    Raises:
        RuntimeError: no compiler, or the build failed (the message says why).
    """
    global _LIB, _LIB_ERROR
    if _LIB is None:
        if _LIB_ERROR is not None:
            raise RuntimeError(_LIB_ERROR)
        try:
            _LIB = _load()
        except (RuntimeError, OSError, subprocess.SubprocessError) as err:
            _LIB_ERROR = f"symlib C kernels unavailable: {err}"
            raise RuntimeError(_LIB_ERROR) from err
    return CKernels(activation, _LIB)
