"""The A2C engine's hot path in numba: acting and the n-step update, one lane at a time.

Every function here loops over lanes and does each lane's work with the same code, on that
lane's own rows of the parameter, Adam and rollout buffers, and scratch space that is
rewritten for every lane. No reduction crosses lanes and no kernel choice depends on how many
lanes there are, so a lane's arithmetic is a function of that lane alone (a run's results do
not depend on its batch-mates; tested bit for bit). Working lane by lane also keeps one
lane's weights, moments and gradient in cache while its update runs.

Parameters of a network with sizes (d, h, h, o) sit in one flat row per lane, layer by layer,
weight ``[in, out]`` row-major then bias: the layout of ``StackedMLP.data``, whose numpy view
these kernels update in place (torch keeps using the same storage for distillation).

Floating point: float32 storage and arithmetic as in torch; ``fastmath`` allows FMA
contraction and reassociation (vectorized dot products), which fixes one instruction
sequence per loop length — the same for every lane — and nothing that depends on data
addresses. tanh is a rational approximation (max error 2 ulp-ish, ~1e-7; see ``_tanh``)
that vectorizes, where libm's ``tanhf`` would be a scalar call per unit.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

FASTMATH = {"contract", "reassoc", "nsz", "arcp"}
JIT: dict[str, Any] = dict(cache=True, error_model="numpy", fastmath=FASTMATH, boundscheck=False)


@njit(**JIT)
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


@njit(**JIT)
def tanh_array(x):
    """The kernels' tanh on an array (for tests)."""
    out = np.empty_like(x)
    flat, res = x.ravel(), out.ravel()
    for i in range(flat.size):
        res[i] = _tanh(flat[i])
    return out


@njit(**JIT)
def _layer(p, w, b, n_in, n_out, x, out, relu, activate):
    """out = act(b + x @ W) with W = p[w : w + n_in*n_out] as [n_in, n_out] and b = p[b : b + n_out].

    Loops index slices with plain loop counters only: a computed index (``w + i*n_out + j``)
    keeps LLVM from vectorizing (about 5× slower here); four input rows per pass over ``out``.
    """
    bias = p[b:b + n_out]
    for j in range(n_out):
        out[j] = bias[j]
    i = 0
    while i + 4 <= n_in:
        x0, x1, x2, x3 = x[i], x[i + 1], x[i + 2], x[i + 3]
        r0 = p[w + i * n_out:w + (i + 1) * n_out]
        r1 = p[w + (i + 1) * n_out:w + (i + 2) * n_out]
        r2 = p[w + (i + 2) * n_out:w + (i + 3) * n_out]
        r3 = p[w + (i + 3) * n_out:w + (i + 4) * n_out]
        for j in range(n_out):
            out[j] += (x0 * r0[j] + x1 * r1[j]) + (x2 * r2[j] + x3 * r3[j])
        i += 4
    while i < n_in:
        xi = x[i]
        row = p[w + i * n_out:w + (i + 1) * n_out]
        for j in range(n_out):
            out[j] += xi * row[j]
        i += 1
    if activate:
        if relu:
            for j in range(n_out):
                out[j] = max(out[j], np.float32(0.0))
        else:
            for j in range(n_out):
                out[j] = _tanh(out[j])


@njit(**JIT)
def _forward(p, d, h, o, x, h1, h2, out, relu):
    """Two hidden layers of width h and a linear output; writes h1, h2 (activations) and out."""
    w1, b1 = 0, d * h
    w2, b2 = b1 + h, b1 + h + h * h
    w3, b3 = b2 + h, b2 + h + h * o
    _layer(p, w1, b1, d, h, x, h1, relu, True)
    _layer(p, w2, b2, h, h, h1, h2, relu, True)
    _layer(p, w3, b3, h, o, h2, out, relu, False)


@njit(**JIT)
def _accumulate_outer(g, w, b, n_in, n_out, X, D, T):
    """g's weight rows += Σ_t X[t] ⊗ D[t] and its bias += Σ_t D[t]: each gradient row is read
    and written once per update (four steps per pass), not once per step."""
    gb = g[b:b + n_out]
    for t in range(T):
        dt = D[t]
        for j in range(n_out):
            gb[j] += dt[j]
    for i in range(n_in):
        grow = g[w + i * n_out:w + (i + 1) * n_out]
        t = 0
        while t + 4 <= T:
            x0, x1, x2, x3 = X[t, i], X[t + 1, i], X[t + 2, i], X[t + 3, i]
            d0, d1, d2, d3 = D[t], D[t + 1], D[t + 2], D[t + 3]
            for j in range(n_out):
                grow[j] += (x0 * d0[j] + x1 * d1[j]) + (x2 * d2[j] + x3 * d3[j])
            t += 4
        while t < T:
            xt, dt = X[t, i], D[t]
            for j in range(n_out):
                grow[j] += xt * dt[j]
            t += 1


@njit(**JIT)
def _propagate(p, w, n_in, n_out, D, A, DX, T, relu):
    """DX[t] = (W @ D[t]) · act'(A[t]) for the layer's inputs A (activations of the layer below)."""
    for i in range(n_in):
        row = p[w + i * n_out:w + (i + 1) * n_out]
        for t in range(T):
            dt = D[t]
            s = np.float32(0.0)
            for j in range(n_out):
                s += row[j] * dt[j]
            a = A[t, i]
            if relu:
                DX[t, i] = s if a > 0 else np.float32(0.0)
            else:
                DX[t, i] = s * (np.float32(1.0) - a * a)


@njit(**JIT)
def _backward(p, g, d, h, o, X, H1, H2, DOUT, DH1, DH2, T, relu):
    """Add Σ_t the gradient of ``DOUT[t] · out(X[t])`` w.r.t. the parameters to ``g``, from the
    activations H1, H2 of the forward (rows 0…T−1 of each array are used)."""
    w1, b1 = 0, d * h
    w2, b2 = b1 + h, b1 + h + h * h
    w3, b3 = b2 + h, b2 + h + h * o
    _accumulate_outer(g, w3, b3, h, o, H2, DOUT, T)
    _propagate(p, w3, h, o, DOUT, H2, DH2, T, relu)
    _accumulate_outer(g, w2, b2, h, h, H1, DH2, T)
    _propagate(p, w2, h, h, DH2, H1, DH1, T, relu)
    _accumulate_outer(g, w1, b1, d, h, X, DH1, T)


@njit(**JIT)
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


@njit(**JIT)
def act(params, obs, uniforms, t, d, h, o, relu, cache_h1, cache_h2, cache_logits, cache_obs, cache_ok,
        actions, probs, active):
    """``act_lane`` for every lane, ``uniforms[lane]`` its draw."""
    for lane in range(obs.shape[0]):
        act_lane(lane, params, obs, uniforms[lane], t, d, h, o, relu, cache_h1, cache_h2, cache_logits, cache_obs,
                 cache_ok, actions, probs, active[lane])


@njit(**JIT)
def act_lane(lane, params, obs, uniform, t, d, h, o, relu, cache_h1, cache_h2, cache_logits, cache_obs, cache_ok,
             actions, probs, active):
    """If ``active``: the lane's actor forward on ``obs[lane]``, softmax, one inverse-CDF draw of ``uniform``.

    The activations are kept in slot ``t`` of the caches so that the update, which uses the
    same weights, need not recompute them (it checks ``cache_ok`` and the stored state). A lane
    that does not step (waiting at a barrier, or done) gets action 0 and zero probabilities, and
    its slot is marked stale: its step is not a valid one, so nothing it would have drawn is used.
    """
    if not active:
        cache_ok[lane, t] = False
        actions[lane] = 0
        for k in range(o):
            probs[lane, k] = 0.0
        return
    x = obs[lane]
    logits = cache_logits[lane, t]
    _forward(params[lane], d, h, o, x, cache_h1[lane, t], cache_h2[lane, t], logits, relu)
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


@njit(**JIT)
def _adam(p, g, m, v, step, lr, beta1, beta2, eps):
    """One step of torch's Adam (fused kernel's formula) on one lane's flat parameters."""
    bc1 = 1.0 - beta1 ** step
    bc2_sqrt = math.sqrt(1.0 - beta2 ** step)
    step_size = np.float32(lr / bc1)
    bc2s = np.float32(bc2_sqrt)
    w1, b2, w2, e = np.float32(1.0 - beta1), np.float32(beta2), np.float32(1.0 - beta2), np.float32(eps)
    for k in range(p.shape[0]):
        gk = g[k]
        mk = m[k] + w1 * (gk - m[k])
        vk = b2 * v[k] + w2 * gk * gk
        m[k] = mk
        v[k] = vk
        p[k] -= step_size * mk / (math.sqrt(vk) / bc2s + e)


@njit(**JIT)
def learn_scratch(T, h, A, Pa, Pc):
    """Working space of ``learn_lane``, allocated once and rewritten for every lane."""
    f = np.float32
    return (np.empty(Pa, f), np.empty(Pc, f), np.empty((T, h), f), np.empty((T, h), f), np.empty(T, f),
            np.empty(T, f), np.empty(T, f), np.empty(A, f), np.zeros((T, A), f), np.zeros((T, 1), f),
            np.empty(1, f), np.empty((T, h), f), np.empty((T, h), f), np.empty(h, f), np.empty(h, f))


@njit(**JIT)
def learn(T, d, h, A, relu,
          pa, pc, ma, va, mc, vc, steps_a, steps_c,
          obs, next_obs, actions, rewards, terminated, done, valid,
          cache_h1, cache_h2, cache_logits, cache_obs, cache_ok,
          gamma, value_coef, entropy_coef, max_norm, lr_a, lr_c, beta1, beta2, eps, grads_a, grads_c):
    """One n-step A2C update of every lane from its first ``T`` stored steps (``learn_lane``).

    ``grads_a``/``grads_c``: [L, P] arrays to receive the clipped gradients *instead* of the
    Adam step (for tests), or empty [0, 0] arrays for a normal update.
    """
    scratch = learn_scratch(T, h, A, pa.shape[1], pc.shape[1])
    for lane in range(obs.shape[0]):
        learn_lane(lane, T, d, h, A, relu, pa, pc, ma, va, mc, vc, steps_a, steps_c,
                   obs, next_obs, actions, rewards, terminated, done, valid,
                   cache_h1, cache_h2, cache_logits, cache_obs, cache_ok,
                   gamma, value_coef, entropy_coef, max_norm, lr_a, lr_c, beta1, beta2, eps, grads_a, grads_c, scratch)


@njit(**JIT)
def learn_lane(lane, T, d, h, A, relu,
               pa, pc, ma, va, mc, vc, steps_a, steps_c,
               obs, next_obs, actions, rewards, terminated, done, valid,
               cache_h1, cache_h2, cache_logits, cache_obs, cache_ok,
               gamma, value_coef, entropy_coef, max_norm, lr_a, lr_c, beta1, beta2, eps, grads_a, grads_c, scratch):
    """One n-step A2C update of ``lane`` from its first ``T`` stored steps (SPEC §1).

    Returns bootstrap from V(next state) at the rollout's end and at a truncation, not past a
    termination; the loss is the mean over the lane's valid steps of −log π(a|s)·A +
    value_coef·(R − V)² (+ entropy_coef·Σπ log π); its gradient over both networks is clipped
    to ``max_norm`` (≤ 0: off); each network takes a step of its own Adam with the lane's own
    step count. A lane without valid steps is left untouched. Acting's cached slots of the lane
    are marked stale afterwards (the weights changed).
    """
    Pa, Pc = pa.shape[1], pc.shape[1]
    ga, gc, c_h1, c_h2, values, next_values, returns, logp, dlogits, dvalue, v1, dh1, dh2, s1, s2 = scratch
    count = np.float32(0.0)
    for t in range(T):
        count += valid[lane, t]
    if count == 0:
        for t in range(cache_ok.shape[1]):
            cache_ok[lane, t] = False
        return
    p_a, p_c = pa[lane], pc[lane]
    # actor activations: from acting when they were taken with these weights on this state
    for t in range(T):
        same = cache_ok[lane, t]
        for i in range(d):
            same = same and cache_obs[lane, t, i] == obs[lane, t, i]
        if not same:
            _forward(p_a, d, h, A, obs[lane, t], cache_h1[lane, t], cache_h2[lane, t], cache_logits[lane, t], relu)
    # critic on the rollout's states, on the state after it, and on truncations' next states
    for t in range(T):
        _forward(p_c, d, h, 1, obs[lane, t], c_h1[t], c_h2[t], v1, relu)
        values[t] = v1[0]
    _forward(p_c, d, h, 1, next_obs[lane, T - 1], s1, s2, v1, relu)
    next_values[T - 1] = v1[0]
    for t in range(T - 1):
        if done[lane, t] and not terminated[lane, t]:
            _forward(p_c, d, h, 1, next_obs[lane, t], s1, s2, v1, relu)
            next_values[t] = v1[0]
    # n-step returns, carried in float64 as numpy does in the reference
    ret = np.float64(next_values[T - 1])
    for t in range(T - 1, -1, -1):
        use_next = t == T - 1 or (done[lane, t] and not terminated[lane, t])
        boot = np.float64(next_values[t]) if use_next else ret
        ret = np.float64(rewards[lane, t]) + (0.0 if terminated[lane, t] else gamma) * boot
        returns[t] = np.float32(ret)
    # gradients into one scratch row per network
    for k in range(Pa):
        ga[k] = 0.0
    for k in range(Pc):
        gc[k] = 0.0
    for t in range(T):
        w = valid[lane, t] / count
        if w == 0:
            for k in range(A):
                dlogits[t, k] = 0.0
            dvalue[t, 0] = 0.0
            continue
        logits = cache_logits[lane, t]
        m = logits[0]
        for k in range(1, A):
            m = max(m, logits[k])
        s = np.float32(0.0)
        for k in range(A):
            s += np.float32(math.exp(logits[k] - m))
        lse = m + np.float32(math.log(s))
        ent = np.float32(0.0)
        for k in range(A):
            logp[k] = logits[k] - lse
            ent += np.float32(math.exp(logp[k])) * logp[k]
        advantage = returns[t] - values[t]
        for k in range(A):
            pk = np.float32(math.exp(logp[k]))
            dlogits[t, k] = w * advantage * pk
            if entropy_coef != 0:
                dlogits[t, k] += w * np.float32(entropy_coef) * pk * (logp[k] - ent)
        dlogits[t, actions[lane, t]] -= w * advantage
        dvalue[t, 0] = w * np.float32(value_coef) * np.float32(2.0) * (values[t] - returns[t])
    _backward(p_a, ga, d, h, A, obs[lane], cache_h1[lane], cache_h2[lane], dlogits, dh1, dh2, T, relu)
    _backward(p_c, gc, d, h, 1, obs[lane], c_h1, c_h2, dvalue, dh1, dh2, T, relu)
    if max_norm > 0:
        sq = 0.0
        for k in range(Pa):
            sq += np.float64(ga[k]) * ga[k]
        for k in range(Pc):
            sq += np.float64(gc[k]) * gc[k]
        scale = np.float32(min(max_norm / (math.sqrt(sq) + 1e-6), 1.0))
        if scale < 1:
            for k in range(Pa):
                ga[k] *= scale
            for k in range(Pc):
                gc[k] *= scale
    if grads_a.shape[0]:
        grads_a[lane] = ga
        grads_c[lane] = gc
    else:
        steps_a[lane] += 1
        steps_c[lane] += 1
        _adam(p_a, ga, ma[lane], va[lane], np.float64(steps_a[lane]), lr_a, beta1, beta2, eps)
        _adam(p_c, gc, mc[lane], vc[lane], np.float64(steps_c[lane]), lr_c, beta1, beta2, eps)
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
    pa, pc = np.zeros((L, P), f), np.zeros((L, Pc), f)
    caches = (np.zeros((L, n, h), f), np.zeros((L, n, h), f), np.zeros((L, n, o), f), np.zeros((L, n, d), f),
              np.zeros((L, n), np.bool_))
    act(pa, np.zeros((L, d), f), np.zeros(L), 0, d, h, o, False, *caches, np.zeros(L, np.int64), np.zeros((L, o), f),
        np.ones(L, np.bool_))
    learn(1, d, h, o, False, pa, pc, np.zeros_like(pa), np.zeros_like(pa), np.zeros_like(pc), np.zeros_like(pc),
          np.zeros(L, f), np.zeros(L, f), np.zeros((L, n, d), f), np.zeros((L, n, d), f), np.zeros((L, n), np.int64),
          np.zeros((L, n), f), np.zeros((L, n), np.bool_), np.zeros((L, n), np.bool_), np.ones((L, n), f),
          *caches, 0.99, 0.5, 0.0, 0.5, 7e-4, 7e-4, 0.9, 0.999, 1e-8, np.zeros((0, 0), f), np.zeros((0, 0), f))
    return time.perf_counter() - start
