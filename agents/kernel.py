"""The A2C engine's hot path in numba: acting and the n-step update, one lane at a time.

Every function here loops over lanes and does each lane's work with the same code, on that
lane's own rows of the parameter, Adam and rollout buffers, and scratch space that is
rewritten for every lane. No reduction crosses lanes and no kernel choice depends on how many
lanes there are, so a lane's arithmetic is a function of that lane alone (a run's results do
not depend on its batch-mates; tested bit for bit). Working lane by lane also keeps one
lane's weights, moments and gradient in cache while its update runs. A lane's rows are taken
as borrowed views (``_lane``, ``_row``, ``_rows``), which numba does not reference-count.

Parameters of a network with sizes (d, h, h, o) sit in one flat row per lane, layer by layer,
weight ``[in, out]`` row-major then bias: the layout of ``StackedMLP.data``, whose numpy view
these kernels update in place (torch keeps using the same storage for distillation).

Acting is one state at a time (``_forward``: a layer's outputs summed in registers, in blocks
written in LLVM IR, ``_columns``). The update works on the whole
rollout at once: the critic's forward over its T + 1 states, each weight gradient (Hᵀ·D) and
each back-propagation (D·Wᵀ) is one matrix product, done by BLAS (OpenBLAS through scipy, as
numba's ``np.dot`` calls it; 1.7× faster than the loops it replaced, issue 13). The runner
keeps BLAS on one thread (``one_blas_thread``), so each product's summation order is fixed by
its shape, the same for every lane.

Floating point: float32 storage and arithmetic as in torch; ``fastmath`` allows FMA
contraction and reassociation (vectorized dot products), which fixes one instruction
sequence per loop length — the same for every lane — and nothing that depends on data
addresses. tanh is a rational approximation (max error 2 ulp-ish, ~1e-7; see ``_tanh``)
that vectorizes, where libm's ``tanhf`` would be a scalar call per unit. Results are exact
per machine, not across CPU kinds: numba compiles for the host CPU and OpenBLAS picks its
kernels by CPU.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

from frd.jit import JIT, compiled


class Dims(NamedTuple):
    """The shape of a lane's networks: (d, h, h, o) for the actor, (d, h, h, 1) for the critic."""

    d: int
    h: int
    o: int
    relu: bool


class Nets(NamedTuple):
    """Every lane's flat parameters, [L, P] rows laid out as ``StackedMLP.data``."""

    actor: np.ndarray
    critic: np.ndarray


class Adam(NamedTuple):
    """Every lane's Adam moments ([L, P], as its network) and step count ([L])."""

    actor_m: np.ndarray
    actor_v: np.ndarray
    critic_m: np.ndarray
    critic_v: np.ndarray
    actor_steps: np.ndarray
    critic_steps: np.ndarray


class Transitions(NamedTuple):
    """Every lane's rollout, [L, n, …]: the state, the state reached, the action, the reward, whether
    the episode terminated or ended, and whether the lane took the step (1.0) or not (0.0)."""

    obs: np.ndarray
    next_obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    done: np.ndarray
    valid: np.ndarray


class ActCache(NamedTuple):
    """What acting computed for each lane's rollout slot [L, n, …]: the actor's hidden activations
    and logits, the state it acted on, and whether the slot is still valid (``act_lane``)."""

    h1: np.ndarray
    h2: np.ndarray
    logits: np.ndarray
    obs: np.ndarray
    ok: np.ndarray


class Hyper(NamedTuple):
    """An update's numbers: discount, value weight, clip norm (≤ 0: off), the two
    learning rates, Adam's betas and epsilon, and the training reward at a failure (NaN: the env's)."""

    gamma: float
    value_coef: float
    max_norm: float
    lr_a: float
    lr_c: float
    beta1: float
    beta2: float
    eps: float
    failure_reward: float


def one_blas_thread() -> None:
    """Keep the BLAS that ``np.dot`` calls here on one thread: lane after lane, and a summation
    order that no thread split can change. scipy's OpenBLAS, which numba calls, is loaded first,
    since a limit reaches only the libraries already loaded (numba loads it at its first product)."""
    import scipy.linalg.cython_blas  # noqa: F401
    import threadpoolctl

    threadpoolctl.threadpool_limits(1, user_api="blas")


@compiled(**JIT)
def _tanh(x):
    """float32 tanh, Eigen's rational approximation (as in TensorFlow/XLA); |error| < 4e-7."""
    x = min(max(x, np.float32(-7.90531110763549805)), np.float32(7.90531110763549805))
    x2 = x * x
    p = np.float32(-2.76076847742355e-16) * x2 + np.float32(2.00018790482477e-13)
    p = p * x2 + np.float32(-8.60467152213735e-11)
    p = p * x2 + np.float32(5.12229709037114e-08)
    p = p * x2 + np.float32(1.48572235717979e-05)
    p = p * x2 + np.float32(6.37261928875436e-04)
    p = p * x2 + np.float32(4.89352455891786e-03)
    p = p * x
    q = np.float32(1.19825839466702e-06) * x2 + np.float32(1.18534705686654e-04)
    q = q * x2 + np.float32(2.26843463243900e-03)
    q = q * x2 + np.float32(4.89352518554385e-03)
    return p / q


@compiled(**JIT)
def tanh_array(x):
    """The kernels' tanh on an array (for tests)."""
    out = np.empty_like(x)
    flat, res = x.ravel(), out.ravel()
    for i in range(flat.size):
        res[i] = _tanh(flat[i])
    return out


def _columns(width: int):
    """An intrinsic ``columns(p, start, stride, bias, x, out, col, n_in)``: out[col : col + width] =
    p[bias : bias + width] + Σ_i x[i] · p[start + i·stride : … + width], one fused multiply-add
    per input row in that order, the ``width`` sums held in registers throughout (8-wide vectors,
    or one of ``width``).

    Written in LLVM IR because numba's loops cannot say it: LLVM, unable to prove that ``out``
    and the weights do not overlap, loads and stores ``out`` again for every few input rows
    (2× slower for a 64×64 layer, ``python -m benchmarks.mkl_products``). The loops it replaced
    did the same multiply-adds in the same order (LLVM had chained them so): same bits."""
    lanes = min(width, 8)
    chunks = width // lanes

    @intrinsic
    def columns(typingctx, p, start, stride, bias, x, out, col, n_in):
        sig = types.void(p, start, stride, bias, x, out, col, n_in)

        def codegen(context, builder, signature, args):
            vec, i64, i32 = ir.VectorType(ir.FloatType(), lanes), ir.IntType(64), ir.IntType(32)
            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * 3), f"llvm.fma.v{lanes}f32")
            p_data, x_data, out_data = (context.make_array(signature.args[k])(context, builder, value=args[k]).data
                                        for k in (0, 4, 5))
            _, start, stride, bias, _, _, col, n_in = args
            weights = builder.gep(p_data, [start])
            sums = builder.bitcast(builder.gep(out_data, [col]), vec.as_pointer())
            biases = builder.bitcast(builder.gep(p_data, [bias]), vec.as_pointer())
            parts = [ir.Constant(i64, k) for k in range(chunks)]
            before = [builder.load(builder.gep(biases, [k]), align=4) for k in parts]
            entry, loop, after = builder.block, builder.append_basic_block("rows"), builder.append_basic_block("rows.done")
            builder.cbranch(builder.icmp_signed(">", n_in, ir.Constant(i64, 0)), loop, after)
            builder.position_at_end(loop)
            i = builder.phi(i64)
            acc = [builder.phi(vec) for _ in parts]
            xi = builder.insert_element(ir.Constant(vec, ir.Undefined), builder.load(builder.gep(x_data, [i])),
                                        ir.Constant(i32, 0))
            xi = builder.shuffle_vector(xi, ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))
            row = builder.bitcast(builder.gep(weights, [builder.mul(i, stride)]), vec.as_pointer())
            summed = [builder.call(fma, [xi, builder.load(builder.gep(row, [k]), align=4), a]) for k, a in zip(parts, acc)]
            following = builder.add(i, ir.Constant(i64, 1))
            i.add_incoming(ir.Constant(i64, 0), entry)
            i.add_incoming(following, loop)
            for a, b, c in zip(acc, before, summed):
                a.add_incoming(b, entry)
                a.add_incoming(c, loop)
            builder.cbranch(builder.icmp_signed("<", following, n_in), loop, after)
            builder.position_at_end(after)
            finals = [builder.phi(vec) for _ in parts]
            for final, b, c in zip(finals, before, summed):
                final.add_incoming(b, entry)
                final.add_incoming(c, loop)
            for k, final in zip(parts, finals):
                builder.store(final, builder.gep(sums, [k]), align=4)
            return context.get_dummy_value()

        return sig, codegen

    return columns


_columns64, _columns8, _columns2, _columns1 = (_columns(width) for width in (64, 8, 2, 1))


def _borrowed_view(typingctx, a, start, shape):
    """The typing and code of ``_row`` and ``_rows``: the C-ordered array of ``shape`` whose first
    element is ``a``'s flat element ``start`` (``a`` C-contiguous), owning no reference to ``a``'s
    memory.

    It is what ``a[lane]``, ``a[lane, :T]`` or ``p[w:b].reshape(n, m)`` give, the same addresses
    and the same array type, so the same BLAS calls; but numba counts the references of those
    views with an atomic add and subtract each, and calls a helper for every ``reshape``: 7.7 % of
    a fused period's samples under ``perf`` at 64 lanes, 3.9 % with these. Only for views that
    live inside the call that made them, while ``a`` lives; no bounds are checked."""
    _check_c_ordered(a)
    out_type = types.Array(a.dtype, len(shape), "C")

    def codegen(context, builder, signature, args):
        extents = [context.cast(builder, value, ty, types.intp) for value, ty in zip(args[2:], signature.args[2:])]
        first = context.cast(builder, args[1], signature.args[1], types.intp)
        return _view_code(context, builder, a, args[0], out_type, first, extents)

    return out_type(a, start, *shape), codegen


def _check_c_ordered(a) -> None:
    if not isinstance(a, types.Array) or a.layout != "C":
        raise TypingError(f"a borrowed view needs a C-contiguous array, not {a}")


def _view_code(context, builder, a_type, a_value, out_type, first, extents):
    """An ``out_type`` array over ``a``'s data from flat element ``first``, C-ordered ``extents``,
    no meminfo (``_borrowed_view``)."""
    source = context.make_array(a_type)(context, builder, value=a_value)
    out = context.make_array(out_type)(context, builder)
    itemsize = context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(a_type.dtype)))
    strides, stride = [], itemsize
    for extent in reversed(extents):
        strides.insert(0, stride)
        stride = builder.mul(stride, extent)
    populate_array(out, data=builder.gep(source.data, [first]), shape=extents, strides=strides, itemsize=itemsize,
                   meminfo=None)
    return out._getvalue()


@intrinsic
def _lane(typingctx, a, lane):
    """``a[lane]`` of a 2-d ``a`` as a borrowed view (``_borrowed_view``)."""
    _check_c_ordered(a)
    if a.ndim != 2:
        raise TypingError(f"a lane's row needs a 2-d array, not {a}")
    out_type = types.Array(a.dtype, 1, "C")

    def codegen(context, builder, signature, args):
        cols = builder.extract_value(context.make_array(a)(context, builder, value=args[0]).shape, 1)
        first = builder.mul(context.cast(builder, args[1], signature.args[1], types.intp), cols)
        return _view_code(context, builder, a, args[0], out_type, first, [cols])

    return out_type(a, lane), codegen


@intrinsic
def _row(typingctx, a, start, n):
    """``a``'s flat elements ``start`` … ``start + n`` as a 1-d array (``_borrowed_view``)."""
    return _borrowed_view(typingctx, a, start, (n,))


@intrinsic
def _rows(typingctx, a, start, rows, cols):
    """``a``'s flat elements from ``start`` as a [rows, cols] array (``_borrowed_view``)."""
    return _borrowed_view(typingctx, a, start, (rows, cols))


@compiled(**JIT)
def _layer(p, w, b, n_in, n_out, x, out, relu, activate):
    """out = act(b + x @ W) with W = p[w : w + n_in*n_out] as [n_in, n_out] and b = p[b : b + n_out]:
    blocks of 64 outputs, then of 8, 2 and 1, each summed in registers (``_columns``)."""
    col = 0
    while col + 64 <= n_out:
        _columns64(p, w + col, n_out, b + col, x, out, col, n_in)
        col += 64
    while col + 8 <= n_out:
        _columns8(p, w + col, n_out, b + col, x, out, col, n_in)
        col += 8
    while col + 2 <= n_out:
        _columns2(p, w + col, n_out, b + col, x, out, col, n_in)
        col += 2
    if col < n_out:
        _columns1(p, w + col, n_out, b + col, x, out, col, n_in)
    if activate:
        if relu:
            for j in range(n_out):
                out[j] = max(out[j], np.float32(0.0))
        else:
            for j in range(n_out):
                out[j] = _tanh(out[j])


@compiled(**JIT)
def _offsets(d, h, o):
    """Where each weight matrix and bias of a (d, h, h, o) network starts in its flat row."""
    w1, b1 = 0, d * h
    w2, b2 = b1 + h, b1 + h + h * h
    w3, b3 = b2 + h, b2 + h + h * o
    return w1, b1, w2, b2, w3, b3


@compiled(**JIT)
def _forward(p, d, h, o, x, h1, h2, out, relu):
    """Two hidden layers of width h and a linear output; writes h1, h2 (activations) and out."""
    w1, b1, w2, b2, w3, b3 = _offsets(d, h, o)
    _layer(p, w1, b1, d, h, x, h1, relu, True)
    _layer(p, w2, b2, h, h, h1, h2, relu, True)
    _layer(p, w3, b3, h, o, h2, out, relu, False)


@compiled(**JIT)
def _bias_activate(Y, bias, relu, activate):
    """Y[t] = act(Y[t] + bias) for every row t."""
    for t in range(Y.shape[0]):
        y = Y[t]
        for j in range(y.shape[0]):
            y[j] += bias[j]
        if activate:
            if relu:
                for j in range(y.shape[0]):
                    y[j] = max(y[j], np.float32(0.0))
            else:
                for j in range(y.shape[0]):
                    y[j] = _tanh(y[j])


@compiled(**JIT)
def _forward_rows(p, d, h, o, X, H1, H2, OUT, relu):
    """``_forward`` of every row of X at once: each layer one matrix product (BLAS sgemm, a
    fixed summation order for a given shape, whatever the lane), then bias and activation."""
    w1, b1, w2, b2, w3, b3 = _offsets(d, h, o)
    np.dot(X, _rows(p, w1, d, h), H1)
    _bias_activate(H1, _row(p, b1, h), relu, True)
    np.dot(H1, _rows(p, w2, h, h), H2)
    _bias_activate(H2, _row(p, b2, h), relu, True)
    np.dot(H2, _rows(p, w3, h, o), OUT)
    _bias_activate(OUT, _row(p, b3, o), relu, False)


@compiled(**JIT)
def _column_sums(D, out):
    """out = Σ_t D[t] (a bias's gradient)."""
    for j in range(out.shape[0]):
        out[j] = 0.0
    for t in range(D.shape[0]):
        dt = D[t]
        for j in range(out.shape[0]):
            out[j] += dt[j]


@compiled(**JIT)
def _derivative(DX, A, relu):
    """DX *= act'(layer input A), from the activations A themselves (tanh' = 1 − a², relu' = [a > 0])."""
    for t in range(DX.shape[0]):
        for i in range(DX.shape[1]):
            a = A[t, i]
            if relu:
                DX[t, i] = DX[t, i] if a > 0 else np.float32(0.0)
            else:
                DX[t, i] *= np.float32(1.0) - a * a


@compiled(**JIT)
def _backward(p, g, d, h, o, X, H1, H2, DOUT, DH1, DH2, relu):
    """Write into ``g`` Σ_t the gradient of ``DOUT[t] · out(X[t])`` w.r.t. the parameters, from
    the activations H1, H2 of the forward (one row per step t): three weight gradients as
    matrix products (Hᵀ·D) and two back-propagations (D·Wᵀ), each one BLAS call."""
    w1, b1, w2, b2, w3, b3 = _offsets(d, h, o)
    np.dot(H2.T, DOUT, _rows(g, w3, h, o))
    _column_sums(DOUT, _row(g, b3, o))
    np.dot(DOUT, _rows(p, w3, h, o).T, DH2)
    _derivative(DH2, H2, relu)
    np.dot(H1.T, DH2, _rows(g, w2, h, h))
    _column_sums(DH2, _row(g, b2, h))
    np.dot(DH2, _rows(p, w2, h, h).T, DH1)
    _derivative(DH1, H1, relu)
    np.dot(X.T, DH1, _rows(g, w1, d, h))
    _column_sums(DH1, _row(g, b1, h))


@compiled(**JIT)
def forward(params, x, d, h, o, relu):
    """Forward of every lane on ``x`` [L, B, d] → [L, B, o] (the kernels' arithmetic, for tests)."""
    L, B = x.shape[0], x.shape[1]
    out = np.empty((L, B, o), np.float32)
    h1 = np.empty(h, np.float32)
    h2 = np.empty(h, np.float32)
    for lane in range(L):
        for b in range(B):
            _forward(params[lane], d, h, o, x[lane, b], h1, h2, out[lane, b], relu)
    return out


@compiled(**JIT)
def act(params, obs, uniforms, t, dims, cache, actions, probs, active):
    """``act_lane`` for every lane, ``uniforms[lane]`` its draw (``obs`` C-ordered: its rows are borrowed)."""
    for lane in range(obs.shape[0]):
        act_lane(lane, params, obs, uniforms[lane], t, dims, cache, actions, probs, active[lane])


@compiled(**JIT)
def act_lane(lane, params, obs, uniform, t, dims, cache, actions, probs, active):
    """If ``active``: the lane's actor forward on ``obs[lane]``, softmax, one inverse-CDF draw of ``uniform``.

    The activations are kept in slot ``t`` of the caches so that the update, which uses the
    same weights, need not recompute them (it checks ``cache_ok`` and the stored state). A lane
    that does not step (waiting at a barrier, or done) gets action 0 and zero probabilities, and
    its slot is marked stale: its step is not a valid one, so nothing it would have drawn is used.
    """
    d, h, o, relu = dims
    cache_h1, cache_h2, cache_logits, cache_obs, cache_ok = cache
    if not active:
        cache_ok[lane, t] = False
        actions[lane] = 0
        for k in range(o):
            probs[lane, k] = 0.0
        return
    x = _lane(obs, lane)  # obs[lane], cache_h1[lane, t], …: views that count no references
    slot = lane * cache_ok.shape[1] + t
    logits = _row(cache_logits, slot * o, o)
    _forward(_lane(params, lane), d, h, o, x, _row(cache_h1, slot * h, h), _row(cache_h2, slot * h, h), logits, relu)
    for i in range(d):
        cache_obs[lane, t, i] = x[i]
    cache_ok[lane, t] = True
    m = logits[0]
    for k in range(1, o):
        m = max(m, logits[k])
    s = np.float32(0.0)
    for k in range(o):
        e = np.float32(math.exp(logits[k] - m))
        probs[lane, k] = e
        s += e
    cumulative = np.float32(0.0)
    chosen = 0
    for k in range(o):
        probs[lane, k] /= s
        cumulative += probs[lane, k]
        if cumulative < uniform:
            chosen += 1
    actions[lane] = min(chosen, o - 1)


@compiled(**JIT)
def _adam(p, g, scale, m, v, step, lr, beta1, beta2, eps):
    """One step of torch's Adam (fused kernel's formula) on one lane's flat parameters, with
    gradient ``scale * g`` (the clip's factor, applied on the fly: one pass fewer)."""
    bc1 = 1.0 - beta1 ** step
    bc2_sqrt = math.sqrt(1.0 - beta2 ** step)
    step_size = np.float32(lr / bc1)
    bc2s = np.float32(bc2_sqrt)
    w1, b2, w2, e = np.float32(1.0 - beta1), np.float32(beta2), np.float32(1.0 - beta2), np.float32(eps)
    for k in range(p.shape[0]):
        gk = g[k] * scale
        mk = m[k] + w1 * (gk - m[k])
        vk = b2 * v[k] + w2 * gk * gk
        m[k] = mk
        v[k] = vk
        p[k] -= step_size * mk / (math.sqrt(vk) / bc2s + e)


@compiled(**JIT)
def learn_scratch(T, d, h, A, Pa, Pc):
    """Working space of ``learn_lane``, allocated once and rewritten for every lane."""
    f = np.float32
    return (np.empty(Pa, f), np.empty(Pc, f), np.empty((T + 1, d), f), np.empty((T + 1, h), f),
            np.empty((T + 1, h), f), np.empty((T + 1, 1), f), np.empty(T, f), np.empty(T, f), np.empty(A, f),
            np.empty((T, A), f), np.empty((T, 1), f), np.empty((T, h), f), np.empty((T, h), f),
            np.empty((1, d), f), np.empty((1, h), f), np.empty((1, h), f), np.empty((1, 1), f))


@compiled(**JIT)
def learn(T, dims, nets, adam, rollout, cache, hyper, grads_a, grads_c):
    """One n-step A2C update of every lane from its first ``T`` stored steps (``learn_lane``).

    ``grads_a``/``grads_c``: [L, P] arrays to receive the clipped gradients *instead* of the
    Adam step (for tests), or empty [0, 0] arrays for a normal update.
    """
    scratch = learn_scratch(T, dims.d, dims.h, dims.o, nets.actor.shape[1], nets.critic.shape[1])
    for lane in range(rollout.obs.shape[0]):
        learn_lane(lane, T, dims, nets, adam, rollout, cache, hyper, grads_a, grads_c, scratch)


@compiled(**JIT)
def _squares(g):
    """Σ g², float32 as torch's ``clip_grad_norm_`` (vectorized: summation order fixed by the length)."""
    s = np.float32(0.0)
    for k in range(g.shape[0]):
        s += g[k] * g[k]
    return s


@compiled(**JIT)
def learn_lane(lane, T, dims, nets, adam, rollout, cache, hyper, grads_a, grads_c, scratch):
    """One n-step A2C update of ``lane`` from its first ``T`` stored steps (the recipe: agents/README.md).

    Returns bootstrap from V(next state) at the rollout's end and at a truncation, not past a
    termination; the loss is the mean over the lane's valid steps of −log π(a|s)·A +
    value_coef·(R − V)² (no entropy term: no recipe has one); its gradient over both networks is clipped
    to ``max_norm`` (≤ 0: off); each network takes a step of its own Adam with the lane's own
    step count. A lane without valid steps is left untouched. Acting's cached slots of the lane
    are marked stale afterwards (the weights changed). The bundles are unpacked once, so that the
    loops run on local names.
    """
    d, h, A, relu = dims
    pa, pc = nets
    ma, va, mc, vc, steps_a, steps_c = adam
    obs, next_obs, actions, rewards, terminated, done, valid = rollout
    cache_h1, cache_h2, cache_logits, cache_obs, cache_ok = cache
    gamma, value_coef, max_norm, lr_a, lr_c, beta1, beta2, eps, _ = hyper
    Pa, Pc = pa.shape[1], pc.shape[1]
    (ga, gc, states, c_h1, c_h2, c_out, next_values, returns, e_k, dlogits, dvalue, dh1, dh2,
     x1, x1_h1, x1_h2, x1_out) = scratch
    count = np.float32(0.0)
    for t in range(T):
        count += valid[lane, t]
    if count == 0:
        for t in range(cache_ok.shape[1]):
            cache_ok[lane, t] = False
        return
    p_a, p_c = _lane(pa, lane), _lane(pc, lane)
    # actor activations: from acting when they were taken with these weights on this state
    for t in range(T):
        same = cache_ok[lane, t]
        for i in range(d):
            same = same and cache_obs[lane, t, i] == obs[lane, t, i]
        if not same:
            _forward(p_a, d, h, A, obs[lane, t], cache_h1[lane, t], cache_h2[lane, t], cache_logits[lane, t], relu)
    # critic on the rollout's states and the state after it (one matrix product per layer), and
    # on truncations' next states
    for t in range(T):
        for i in range(d):
            states[t, i] = obs[lane, t, i]
    states[T] = next_obs[lane, T - 1]
    _forward_rows(p_c, d, h, 1, states, c_h1, c_h2, c_out, relu)
    next_values[T - 1] = c_out[T, 0]
    for t in range(T - 1):
        if done[lane, t] and not terminated[lane, t]:
            x1[0] = next_obs[lane, t]
            _forward_rows(p_c, d, h, 1, x1, x1_h1, x1_h2, x1_out, relu)
            next_values[t] = x1_out[0, 0]
    # n-step returns, carried in float64 as numpy does in the reference
    ret = np.float64(next_values[T - 1])
    for t in range(T - 1, -1, -1):
        use_next = t == T - 1 or (done[lane, t] and not terminated[lane, t])
        boot = np.float64(next_values[t]) if use_next else ret
        ret = np.float64(rewards[lane, t]) + (0.0 if terminated[lane, t] else gamma) * boot
        returns[t] = np.float32(ret)
    # the loss's gradient w.r.t. the actor's logits and the critic's value at each step
    for t in range(T):
        w = valid[lane, t] / count
        if w == 0:
            for k in range(A):
                dlogits[t, k] = 0.0
            dvalue[t, 0] = 0.0
            continue
        logits = _row(cache_logits, (lane * cache_ok.shape[1] + t) * A, A)
        m = logits[0]
        for k in range(1, A):
            m = max(m, logits[k])
        s = np.float32(0.0)
        for k in range(A):
            e_k[k] = np.float32(math.exp(logits[k] - m))
            s += e_k[k]
        advantage = returns[t] - c_out[t, 0]
        for k in range(A):
            dlogits[t, k] = w * advantage * (e_k[k] / s)  # π_k · A: no log or second exp needed
        dlogits[t, actions[lane, t]] -= w * advantage
        dvalue[t, 0] = w * np.float32(value_coef) * np.float32(2.0) * (c_out[t, 0] - returns[t])
    X = _rows(obs, lane * obs.shape[1] * d, T, d)  # obs[lane, :T]
    slots = lane * cache_ok.shape[1] * h
    _backward(p_a, ga, d, h, A, X, _rows(cache_h1, slots, T, h), _rows(cache_h2, slots, T, h), dlogits, dh1, dh2,
              relu)
    _backward(p_c, gc, d, h, 1, X, _rows(c_h1, 0, T, h), _rows(c_h2, 0, T, h), dvalue, dh1, dh2, relu)
    scale = np.float32(1.0)
    if max_norm > 0:
        norm = math.sqrt(_squares(ga) + _squares(gc))
        scale = np.float32(min(max_norm / (norm + 1e-6), 1.0))
    if grads_a.shape[0]:
        for k in range(Pa):
            grads_a[lane, k] = ga[k] * scale
        for k in range(Pc):
            grads_c[lane, k] = gc[k] * scale
    else:
        steps_a[lane] += 1
        steps_c[lane] += 1
        _adam(p_a, ga, scale, _lane(ma, lane), _lane(va, lane), np.float64(steps_a[lane]), lr_a, beta1, beta2, eps)
        _adam(p_c, gc, scale, _lane(mc, lane), _lane(vc, lane), np.float64(steps_c[lane]), lr_c, beta1, beta2, eps)
    for t in range(cache_ok.shape[1]):
        cache_ok[lane, t] = False


def warm_up() -> float:
    """Compile (first run) or load from numba's on-disk cache (later runs) the kernels the
    population uses; returns the seconds it took."""
    import time

    start = time.perf_counter()
    L, n, d, h, o = 1, 2, 4, 2, 2
    P = d * h + h + h * h + h + h * o + o
    Pc = P - h * o - o + h + 1
    f = np.float32
    dims, nets = Dims(d, h, o, False), Nets(np.zeros((L, P), f), np.zeros((L, Pc), f))
    cache = ActCache(np.zeros((L, n, h), f), np.zeros((L, n, h), f), np.zeros((L, n, o), f), np.zeros((L, n, d), f),
                     np.zeros((L, n), np.bool_))
    act(nets.actor, np.zeros((L, d), f), np.zeros(L), 0, dims, cache, np.zeros(L, np.int64), np.zeros((L, o), f),
        np.ones(L, np.bool_))
    adam = Adam(np.zeros((L, P), f), np.zeros((L, P), f), np.zeros((L, Pc), f), np.zeros((L, Pc), f), np.zeros(L, f),
                np.zeros(L, f))
    rollout = Transitions(np.zeros((L, n, d), f), np.zeros((L, n, d), f), np.zeros((L, n), np.int64), np.zeros((L, n), f),
                        np.zeros((L, n), np.bool_), np.zeros((L, n), np.bool_), np.ones((L, n), f))
    learn(1, dims, nets, adam, rollout, cache, Hyper(0.99, 0.5, 0.5, 7e-4, 7e-4, 0.9, 0.999, 1e-8, math.nan),
          np.zeros((0, 0), f), np.zeros((0, 0), f))
    return time.perf_counter() - start
