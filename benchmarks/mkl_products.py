"""The A2C update's small matrix products: OpenBLAS (numba's ``np.dot``, what the engine uses)
against MKL's JIT GEMM kernels (one generated kernel per shape), one shape at a time.

    pip install mkl==2026.2.0 && python -m benchmarks.mkl_products [--repeats 200000]

A measurement behind a choice not made (issue 13, part 2): MKL's JIT kernels are 1.2–10× faster
per product, yet the engine stays on OpenBLAS. A prototype that ran every product of the
update and of acting through them (README, *Fifth pass*) made a lane-period no faster end to
end, and the ``mkl`` wheel is 221 MB. Also acting's layers as the engine computes them
(``kernel._layer``: blocks of 64 outputs in registers, ``kernel._columns64``, the rest in loops),
against both. CPU µs per call, data in L1.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.metadata

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from benchmarks.common import Clock
from frd.agents import kernel
from frd.jit import JIT, compiled

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def mkl() -> ctypes.CDLL:
    """MKL's single dynamic library from the ``mkl`` wheel, sequential."""
    try:
        files = importlib.metadata.files("mkl") or []
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit("this benchmark needs MKL: pip install mkl==2026.2.0") from None
    path = next(f.locate() for f in files if f.name.startswith("libmkl_rt.so"))
    lib = ctypes.CDLL(str(path))
    lib.MKL_Set_Threading_Layer(1)  # sequential
    lib.mkl_cblas_jit_create_sgemm.restype = ctypes.c_int
    lib.mkl_cblas_jit_create_sgemm.argtypes = [
        ctypes.POINTER(ctypes.c_void_p), *[ctypes.c_int] * 6, ctypes.c_float, ctypes.c_int, ctypes.c_int,
        ctypes.c_float, ctypes.c_int]
    lib.mkl_jit_get_sgemm_ptr.restype = ctypes.c_void_p
    lib.mkl_jit_get_sgemm_ptr.argtypes = [ctypes.c_void_p]
    return lib


def jit_kernel(lib: ctypes.CDLL, m: int, n: int, k: int, trans_a: bool, trans_b: bool) -> tuple[int, int]:
    """(function pointer, jitter) of C[m, n] = op(A)·op(B), row-major, β = 0."""
    jitter = ctypes.c_void_p()
    status = lib.mkl_cblas_jit_create_sgemm(
        ctypes.byref(jitter), _ROW_MAJOR, _TRANS if trans_a else _NO_TRANS, _TRANS if trans_b else _NO_TRANS,
        m, n, k, 1.0, m if trans_a else k, k if trans_b else n, 0.0, n)
    if status == 2:
        raise RuntimeError(f"MKL could not create a {m}x{n}x{k} kernel")
    return int(lib.mkl_jit_get_sgemm_ptr(jitter)), int(jitter.value or 0)


@intrinsic
def _call(typingctx, fn, jitter, a, b, c):
    """c = op(a)·op(b) by the JIT kernel at address ``fn``, on the arrays' data pointers."""
    sig = types.void(fn, jitter, a, b, c)

    def codegen(context, builder, signature, args):
        void_p, float_p = ir.IntType(8).as_pointer(), ir.FloatType().as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [void_p, float_p, float_p, float_p])
        data = [context.make_array(signature.args[i])(context, builder, value=args[i]).data for i in (2, 3, 4)]
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [builder.inttoptr(args[1], void_p), *data])
        return context.get_dummy_value()

    return sig, codegen


@compiled(**JIT)
def _by_mkl(fn, jitter, a, b, c, repeats):
    for _ in range(repeats):
        _call(fn, jitter, a, b, c)


@compiled(**JIT)
def _by_dot(a, b, c, trans_a, trans_b, repeats):
    for _ in range(repeats):
        if trans_a:
            np.dot(a.T, b, c)
        elif trans_b:
            np.dot(a, b.T, c)
        else:
            np.dot(a, b, c)


@compiled(**JIT)
def _by_layer(w, x, out, n_in, n_out, repeats):
    for _ in range(repeats):
        kernel._layer(w, 0, n_in * n_out, n_in, n_out, x, out, False, False)


SHAPES = {  # what: (m, n, k, op(A) transposed, op(B) transposed); h = 64, d = 4, T = 8, actor o = 2
    "critic forward, [9, 4]·[4, 64]": (9, 64, 4, False, False),
    "critic forward, [9, 64]·[64, 64]": (9, 64, 64, False, False),
    "critic forward, [9, 64]·[64, 1]": (9, 1, 64, False, False),
    "actor grad, H2ᵀ·D [64, 8]·[8, 2]": (64, 2, 8, True, False),
    "actor back-prop, D·W3ᵀ [8, 2]·[2, 64]": (8, 64, 2, False, True),
    "grad, H1ᵀ·D [64, 8]·[8, 64]": (64, 64, 8, True, False),
    "back-prop, D·W2ᵀ [8, 64]·[64, 64]": (8, 64, 64, False, True),
    "grad, Xᵀ·D [4, 8]·[8, 64]": (4, 64, 8, True, False),
    "critic grad, H2ᵀ·D [64, 8]·[8, 1]": (64, 1, 8, True, False),
    "critic back-prop, D·W3ᵀ [8, 1]·[1, 64]": (8, 64, 1, False, True),
    "acting, [1, 4]·[4, 64]": (1, 64, 4, False, False),
    "acting, [1, 64]·[64, 64]": (1, 64, 64, False, False),
    "acting, [1, 64]·[64, 2]": (1, 2, 64, False, False),
}


def per_call(run, inputs: tuple, repeats: int) -> float:
    """CPU µs per product of ``run(*inputs, repeats)``, compiled first."""
    run(*inputs, 10)
    with Clock() as clock:
        run(*inputs, repeats)
    return clock.cpu / repeats * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=200_000)
    args = parser.parse_args()
    lib = mkl()
    kernel.one_blas_thread()
    rng = np.random.default_rng(0)
    print(f"{'product':42s} {'OpenBLAS':>9s} {'MKL JIT':>9s} {'engine':>9s}  (CPU µs per call)")
    for what, (m, n, k, ta, tb) in SHAPES.items():
        a = rng.normal(size=(k, m) if ta else (m, k)).astype(np.float32)
        b = rng.normal(size=(n, k) if tb else (k, n)).astype(np.float32)
        c_dot, c_mkl = np.empty((m, n), np.float32), np.empty((m, n), np.float32)
        fn, jitter = jit_kernel(lib, m, n, k, ta, tb)
        calls = {"dot": (_by_dot, (a, b, c_dot, ta, tb)), "mkl": (_by_mkl, (fn, jitter, a, b, c_mkl))}
        if m == 1:
            w = np.concatenate([b.ravel(), np.zeros(n, np.float32)])  # weights, then a zero bias
            calls["engine"] = (_by_layer, (w, a[0], c_dot[0], k, n))
        seconds = {name: per_call(run, inputs, args.repeats) for name, (run, inputs) in calls.items()}
        _by_dot(a, b, c_dot, ta, tb, 1)
        np.testing.assert_allclose(c_mkl, c_dot, rtol=1e-4, atol=1e-4)
        engine = f"{seconds['engine']:9.3f}" if "engine" in seconds else f"{'':9s}"
        print(f"{what:42s} {seconds['dot']:9.3f} {seconds['mkl']:9.3f} {engine}", flush=True)


if __name__ == "__main__":
    main()
