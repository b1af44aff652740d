"""Fused element-wise passes of :mod:`symlib.inference.mfvi_batched`, in C or in torch.

Each function here is one pass over a ``(models, samples x points, units)`` activation tensor
that eager torch would spread over several kernels (and several 4 MB temporaries at chapter 1's
paper size). Two implementations with one interface:

- :class:`TorchKernels`: plain torch ops (any activation, any machine);
- :class:`CKernels`: the same arithmetic as one C loop per pass (the activation of the next layer
  fused into the output pass of this one), and a counter-based normal generator
  (:meth:`CKernels.normal`), compiled once with the local
  ``g++`` (``-O3 -march=native``; SELU's ``expm1`` by a branch-free polynomial so that the loop
  vectorises) into a per-user temporary folder and loaded with :mod:`ctypes`. SELU only; other
  activations fall back to :class:`TorchKernels` pass by pass.

All tensors are float32 and contiguous; outputs are written in place into the tensors passed.
The two implementations agree to float32 rounding (``tests/inference/test_mfvi_batched.py``).
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
#include <string.h>
#define SA 1.6732632423543772848170429916717f
#define SS 1.0507009873554804934193349852946f
#define R __restrict__

/* expm1(x) for x <= 0, branch-free so the loops vectorise: x = k ln2 + r, |r| <= ln2/2,
   expm1(x) = 2^k (expm1(r) + 1) - 1 = 2^k expm1(r) + (2^k - 1); expm1(r) by its Taylor
   polynomial to r^8 (relative error below 1e-7 on |r| <= ln2/2). */
static inline float expm1_neg(float x) {
    x = x < -87.0f ? -87.0f : x;
    float k = __builtin_rintf(x * 1.44269504088896341f);
    float r = x - k * 0.693145751953125f - k * 1.428606765330187045e-06f;
    float p = 2.48015873015873016e-05f;
    p = p * r + 1.98412698412698413e-04f;
    p = p * r + 1.38888888888888889e-03f;
    p = p * r + 8.33333333333333333e-03f;
    p = p * r + 4.16666666666666667e-02f;
    p = p * r + 1.66666666666666667e-01f;
    p = p * r + 0.5f;
    float em1 = r + r * r * p;
    union { int32_t i; float f; } s;
    s.i = ((int32_t)k + 127) << 23;
    return s.f * em1 + (s.f - 1.0f);
}

extern "C" {

/* a = selu(h), a2 = a^2 */
void selu_fwd(const float* R h, float* R a, float* R a2, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
        float x = h[i];
        float xn = x < 0.0f ? x : 0.0f;
        float v = x > 0.0f ? SS * x : (SS * SA) * expm1_neg(xn);
        a[i] = v;
        a2[i] = v * v;
    }
}

/* gh = selu'(h) (tmu + a tvar), written over tmu; selu'(h) = SS for h > 0, a + SS SA otherwise */
void selu_bwd(const float* R h, const float* R a, float* R tmu, const float* R tvar, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
        float av = a[i];
        float d = h[i] > 0.0f ? SS : av + SS * SA;
        tmu[i] = (tmu[i] + av * tvar[i]) * d;
    }
}

static inline float selu1(float x) {
    float xn = x < 0.0f ? x : 0.0f;
    return x > 0.0f ? SS * x : (SS * SA) * expm1_neg(xn);
}

/* mu (M,S,n,N) += brow (M,S,N) + sqrt(var + bvar (M,N)) * eps; var <- the sd; if a is not
   NULL, also a = selu(mu), a2 = a^2 (the next layer's inputs, while the row is in cache) */
void out_fwd(float* R mu, float* R var, const float* R brow, const float* R bvar, const float* R eps,
             float* R a, float* R a2, int64_t M, int64_t S, int64_t n, int64_t N) {
    for (int64_t m = 0; m < M; ++m)
        for (int64_t s = 0; s < S; ++s) {
            const float* br = brow + (m * S + s) * N;
            const float* bv = bvar + m * N;
            int64_t base = (m * S + s) * n * N;
            for (int64_t i = 0; i < n; ++i) {
                float* mr = mu + base + i * N;
                float* vr = var + base + i * N;
                const float* er = eps + base + i * N;
                for (int64_t c = 0; c < N; ++c) {
                    float sd = sqrtf(vr[c] + bv[c]);
                    vr[c] = sd;
                    mr[c] += br[c] + sd * er[c];
                }
                if (a) {
                    float* ar = a + base + i * N;
                    float* a2r = a2 + base + i * N;
                    for (int64_t c = 0; c < N; ++c) { float v = selu1(mr[c]); ar[c] = v; a2r[c] = v * v; }
                }
            }
        }
}

/* first layer: out (M,S,n,N) = mu1 (M,n,N) + brow (M,S,N) + sd1 (M,n,N) * eps */
void first_fwd(float* R out, const float* R mu1, const float* R sd1, const float* R brow, const float* R eps,
               float* R a, float* R a2, int64_t M, int64_t S, int64_t n, int64_t N) {
    for (int64_t m = 0; m < M; ++m)
        for (int64_t s = 0; s < S; ++s) {
            const float* br = brow + (m * S + s) * N;
            int64_t base = (m * S + s) * n * N;
            for (int64_t i = 0; i < n; ++i) {
                const float* mr = mu1 + (m * n + i) * N;
                const float* sr = sd1 + (m * n + i) * N;
                const float* er = eps + base + i * N;
                float* o = out + base + i * N;
                for (int64_t c = 0; c < N; ++c) o[c] = (mr[c] + br[c]) + sr[c] * er[c];
                if (a) {
                    float* ar = a + base + i * N;
                    float* a2r = a2 + base + i * N;
                    for (int64_t c = 0; c < N; ++c) { float v = selu1(o[c]); ar[c] = v; a2r[c] = v * v; }
                }
            }
        }
}

/* gv = g eps / sd (twice dL/dvar); dbrow (M,S,N) = sum_i g; dbvar (M,N) = sum_{s,i} gv / 2 */
void grad_var(const float* R g, const float* R eps, const float* R sd, float* R gv, float* R dbrow,
              float* R dbvar, int64_t M, int64_t S, int64_t n, int64_t N) {
    float accr[N], accv[N];
    memset(dbvar, 0, sizeof(float) * M * N);
    for (int64_t m = 0; m < M; ++m)
        for (int64_t s = 0; s < S; ++s) {
            int64_t base = (m * S + s) * n * N;
            for (int64_t c = 0; c < N; ++c) { accr[c] = 0.0f; accv[c] = 0.0f; }
            for (int64_t i = 0; i < n; ++i) {
                const float* gr = g + base + i * N;
                const float* er = eps + base + i * N;
                const float* sr = sd + base + i * N;
                float* vr = gv + base + i * N;
                for (int64_t c = 0; c < N; ++c) {
                    float gg = gr[c];
                    float v = gg * er[c] / sr[c];
                    vr[c] = v;
                    accr[c] += gg;
                    accv[c] += v;
                }
            }
            float* dr = dbrow + (m * S + s) * N;
            float* dv = dbvar + m * N;
            for (int64_t c = 0; c < N; ++c) { dr[c] = accr[c]; dv[c] += 0.5f * accv[c]; }
        }
}

/* first layer backward: dmu1 (M,n,N) = sum_s g; dsd1 (M,n,N) = sum_s g eps; dbrow (M,S,N) = sum_i g */
void first_bwd(const float* R g, const float* R eps, float* R dmu1, float* R dsd1, float* R dbrow,
               int64_t M, int64_t S, int64_t n, int64_t N) {
    memset(dmu1, 0, sizeof(float) * M * n * N);
    memset(dsd1, 0, sizeof(float) * M * n * N);
    float accr[N];
    for (int64_t m = 0; m < M; ++m)
        for (int64_t s = 0; s < S; ++s) {
            int64_t base = (m * S + s) * n * N;
            for (int64_t c = 0; c < N; ++c) accr[c] = 0.0f;
            for (int64_t i = 0; i < n; ++i) {
                const float* gr = g + base + i * N;
                const float* er = eps + base + i * N;
                float* dm = dmu1 + (m * n + i) * N;
                float* ds = dsd1 + (m * n + i) * N;
                for (int64_t c = 0; c < N; ++c) {
                    float gg = gr[c];
                    dm[c] += gg;
                    ds[c] += gg * er[c];
                    accr[c] += gg;
                }
            }
            float* dr = dbrow + (m * S + s) * N;
            for (int64_t c = 0; c < N; ++c) dr[c] = accr[c];
        }
}

/* Standard normals from SplitMix64 (Steele, Lea & Flood, 2014) in counter mode, by Box-Muller:
   pair i uses z = mix(key + (i + 1) * golden), u1 = (top 24 bits + 1) / 2^24 in (0, 1],
   u2 = (bits 8..31) / 2^24 in [0, 1); out[i] = r cos(2 pi u2), out[half + i] = r sin(2 pi u2),
   r = sqrt(-2 log u1). log and sincos by polynomials (relative error ~1e-7), branch-free. */
static inline float log_pos(float u) {
    union { float f; int32_t i; } b; b.f = u;
    int32_t e = ((b.i >> 23) & 0xff) - 127;
    b.i = (b.i & 0x7fffff) | 0x3f800000;                 /* m in [1, 2) */
    float m = b.f;
    int big = m > 1.41421356f;
    m = big ? 0.5f * m : m;
    float ef = (float)(e + big);
    float t = (m - 1.0f) / (m + 1.0f), t2 = t * t;
    float p = 1.0f + t2 * (0.333333333f + t2 * (0.2f + t2 * (0.142857143f + t2 * 0.111111111f)));
    return ef * 0.693147180559945f + 2.0f * t * p;
}

void normal_fill(float* R out, int64_t count, uint64_t key) {
    int64_t half = count / 2;
    const float h = 0.70710678118654752f;
    for (int64_t i = 0; i < half + (count & 1); ++i) {
        uint64_t z = key + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float u1 = (float)((uint32_t)(z >> 40) + 1u) * 5.9604644775390625e-08f;
        float u2 = (float)(((uint32_t)z) >> 8) * 5.9604644775390625e-08f;
        float r = sqrtf(-2.0f * log_pos(u1));
        float v = 4.0f * u2;
        int k = (int)v;
        float al = (v - (float)k - 0.5f) * 1.57079632679489662f, a2 = al * al;
        float sa = al * (1.0f + a2 * (-1.66666667e-01f + a2 * (8.33333333e-03f + a2 * (-1.98412698e-04f + a2 * 2.75573192e-06f))));
        float ca = 1.0f + a2 * (-0.5f + a2 * (4.16666667e-02f + a2 * (-1.38888889e-03f + a2 * (2.48015873e-05f - a2 * 2.75573192e-07f))));
        float c0 = (k == 1 || k == 2) ? -h : h;
        float s0 = (k >= 2) ? -h : h;
        float cs = r * (c0 * ca - s0 * sa), sn = r * (s0 * ca + c0 * sa);
        if (i < half) { out[i] = cs; out[half + i] = sn; }
        else out[count - 1] = cs;
    }
}

}  /* extern "C" */
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


class CKernels(TorchKernels):
    """The fused passes as C loops (SELU; other activations use the torch passes)."""

    name = "c"

    def __init__(self, activation: Activation, lib: ctypes.CDLL):
        super().__init__(activation)
        self._lib = lib

    @staticmethod
    def _p(t: Tensor) -> ctypes.c_void_p:
        assert t.dtype == torch.float32 and t.is_contiguous() and t.device.type == "cpu"
        return ctypes.c_void_p(t.data_ptr())

    def act_fwd(self, h, a, a2):
        if self.activation is not Activation.SELU:
            return super().act_fwd(h, a, a2)
        self._lib.selu_fwd(self._p(h), self._p(a), self._p(a2), ctypes.c_int64(h.numel()))

    def act_bwd(self, h, a, tmu, tvar):
        if self.activation is not Activation.SELU:
            return super().act_bwd(h, a, tmu, tvar)
        self._lib.selu_bwd(self._p(h), self._p(a), self._p(tmu), self._p(tvar), ctypes.c_int64(h.numel()))

    def _act_ptrs(self, a, a2):
        if a is None:
            return ctypes.c_void_p(None), ctypes.c_void_p(None)
        return self._p(a), self._p(a2)

    def out_fwd(self, mu, var, brow, bvar, eps, a=None, a2=None):
        if a is not None and self.activation is not Activation.SELU:
            return super().out_fwd(mu, var, brow, bvar, eps, a, a2)
        self._lib.out_fwd(self._p(mu), self._p(var), self._p(brow), self._p(bvar), self._p(eps),
                          *self._act_ptrs(a, a2), *(ctypes.c_int64(d) for d in mu.shape))

    def first_fwd(self, out, mu1, sd1, brow, eps, a=None, a2=None):
        if a is not None and self.activation is not Activation.SELU:
            return super().first_fwd(out, mu1, sd1, brow, eps, a, a2)
        self._lib.first_fwd(self._p(out), self._p(mu1), self._p(sd1), self._p(brow), self._p(eps),
                            *self._act_ptrs(a, a2), *(ctypes.c_int64(d) for d in out.shape))

    def normal(self, count: int, key: int) -> Tensor:
        """``count`` standard normals from the counter-based generator keyed by ``key`` (0 <= key < 2^63)."""
        out = torch.empty(count, dtype=torch.float32)
        self._lib.normal_fill(self._p(out), ctypes.c_int64(count), ctypes.c_uint64(key))
        return out

    def grad_var(self, g, eps, sd, gv, dbrow, dbvar):
        self._lib.grad_var(self._p(g), self._p(eps), self._p(sd), self._p(gv), self._p(dbrow), self._p(dbvar),
                           *(ctypes.c_int64(d) for d in g.shape))

    def first_bwd(self, g, eps, dmu1, dsd1, dbrow):
        self._lib.first_bwd(self._p(g), self._p(eps), self._p(dmu1), self._p(dsd1), self._p(dbrow),
                            *(ctypes.c_int64(d) for d in g.shape))


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


def _load() -> ctypes.CDLL:
    """Compile (once per source, flags and CPU) and load the C passes."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise RuntimeError("no C++ compiler (g++) on PATH")
    key = hashlib.sha256("\0".join([_SOURCE, " ".join(_FLAGS), _cpu_tag(), platform.machine()]).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"symlib-kernels-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    folder.mkdir(parents=True, exist_ok=True)
    lib_path = folder / f"mfvi_{key}.so"
    if not lib_path.is_file():
        # build under a private name, then rename: a concurrent build never leaves a half-written .so
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            src = Path(tmp) / "mfvi.cpp"
            src.write_text(_SOURCE)
            out = Path(tmp) / "mfvi.so"
            proc = subprocess.run([cxx, *_FLAGS, str(src), "-o", str(out)], capture_output=True, text=True,
                                  check=False, timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"g++ failed: {proc.stderr[-2000:]}")
            os.replace(out, lib_path)
    lib = ctypes.CDLL(str(lib_path))
    for name in ("selu_fwd", "selu_bwd", "out_fwd", "first_fwd", "grad_var", "first_bwd", "normal_fill"):
        getattr(lib, name).restype = None
    return lib


def c_kernels(activation: Activation) -> CKernels:
    """The C passes, compiled on first use.

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
