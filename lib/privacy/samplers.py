"""Exact discrete Gaussian and discrete Laplace samplers (Canonne, Kamath and Steinke 2020).

Every random decision is a comparison of integers: uniform integers come from 63-bit
words of the run's numpy generator (rejection sampling, no modulo bias) and
Bernoulli(exp(-N/D)) is CKS Algorithms 1-2 on integers N, D.  No floating-point number
touches the noise, so the released integer counts carry exactly the discrete Gaussian
distribution and none of the float artefacts that break floating-point mechanisms
(Mironov 2012).

The kernels run under numba on int64.  The discrete Gaussian with variance sigma^2 is
drawn with sigma^2 = t*a/q exactly (t = floor(sigma) + 1, q a power of two, a rounded
up so the variance is never below the requested one).  Its acceptance test needs
(q|Y| - a)^2, which stays inside int64 for |Y| <= ``ymax`` (at least 40 t up to sigma
~ 5e7, so a proposal beyond it has probability below exp(-40)); such a proposal is
tested in Python integers by the reference functions below, so the output stays exact.  The reference functions are
the same algorithm in Python integers; given the same words both paths give the same
samples, which tests/test_samplers.py checks.  The exponential mechanism
(lib/privacy/mechanisms.py) uses them directly: its exponents are large exact rationals.

Word buffers are consumed in order; when one runs out mid-proposal the proposal is
replayed from its first word after appending fresh words, so the result is the same as
reading one infinite stream (independent of the buffer size).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np
from numba import njit

SAMPLER_NAME = "exact discrete Gaussian (Canonne-Kamath-Steinke 2020; integer arithmetic, numba)"
CHUNK_WORDS = 1 << 20         # largest word buffer drawn at once (8 MiB)
WORDS_PER_SAMPLE = 16         # a discrete Gaussian draw uses about 14 words at every scale
_MAXW = (1 << 63) - 1
_WORD_BITS_FOR_W = 31          # |q|Y| - a| <= 2**31 keeps (q|Y| - a)**2 within int64
_TAIL_SIGMAS = 40              # ymax is at least this many t's: the Python path is ~exp(-40) rare
SIGMA_MAX = float(1 << 30)

_DONE, _NEED_WORDS, _BIG, _OVERFLOW = 0, 1, 2, 3


# ---------------------------------------------------------------- numba kernels (int64)

@njit(cache=True)
def _below(n, words, pos):  # type: ignore[no-untyped-def]  # a numba kernel: numba types it
    """Uniform integer in [0, n) (n >= 2) by rejection on 63-bit words; -1 if the words ran out."""
    lim = _MAXW - (((_MAXW % n) + 1) % n)
    while pos < len(words):
        w = words[pos]
        pos += 1
        if w <= lim:
            return w % n, pos
    return -1, pos


@njit(cache=True)
def _bern_exp_le1(num, den, words, pos):  # type: ignore[no-untyped-def]  # a numba kernel: numba types it
    """Bernoulli(exp(-num/den)) for 0 <= num <= den (CKS Alg. 1); -1 if the words ran out."""
    k = 1
    while True:
        if num == 0:
            accept = False
        elif num == den:
            accept = True
        else:
            u, pos = _below(den, words, pos)
            if u < 0:
                return -1, pos
            accept = u < num
        if accept and k > 1:
            v, pos = _below(k, words, pos)
            if v < 0:
                return -1, pos
            accept = v == 0
        if not accept:
            return k % 2, pos
        k += 1


@njit(cache=True)
def _bern_exp(num, den, words, pos):  # type: ignore[no-untyped-def]  # a numba kernel: numba types it
    """Bernoulli(exp(-num/den)) for num >= 0 (CKS Alg. 1 with the integer part peeled off)."""
    while num > den:
        b, pos = _bern_exp_le1(1, 1, words, pos)
        if b <= 0:
            return b, pos
        num -= den
    return _bern_exp_le1(num, den, words, pos)


@njit(cache=True)
def _laplace_proposal(t, s, words, pos):  # type: ignore[no-untyped-def]  # a numba kernel: numba types it
    """One discrete Laplace draw, P(y) ∝ exp(-|y| s / t) (CKS Alg. 2): (y, pos, status)."""
    while True:
        u = 0
        if t > 1:
            u, pos = _below(t, words, pos)
            if u < 0:
                return 0, pos, _NEED_WORDS
        d, pos = _bern_exp_le1(u, t, words, pos)
        if d < 0:
            return 0, pos, _NEED_WORDS
        if d == 0:
            continue
        v = 0
        while True:
            b, pos = _bern_exp_le1(1, 1, words, pos)
            if b < 0:
                return 0, pos, _NEED_WORDS
            if b == 0:
                break
            v += 1
            if v > (_MAXW - t) // t:
                return 0, pos, _OVERFLOW
        y = (u + t * v) // s
        sign, pos = _below(2, words, pos)
        if sign < 0:
            return 0, pos, _NEED_WORDS
        if sign == 1 and y == 0:
            continue
        return (y if sign == 0 else -y), pos, _DONE


@njit(cache=True)
def _laplace_kernel(out, start, t, s, words, pos):  # type: ignore[no-untyped-def]  # a numba kernel: numba types it
    i = start
    while i < len(out):
        first = pos
        y, pos, status = _laplace_proposal(t, s, words, pos)
        if status == _NEED_WORDS:
            return _NEED_WORDS, i, first, 0
        if status != _DONE:
            return status, i, pos, 0
        out[i] = y
        i += 1
    return _DONE, i, pos, 0


@njit(cache=True)
def _gaussian_kernel(out, start, t, a, q, ymax, words, pos):  # type: ignore[no-untyped-def]  # a numba kernel: numba types it
    """Fill out[start:] with discrete Gaussian draws of variance t*a/q (CKS Alg. 3).

    Returns (status, next cell, word position, pending proposal): _NEED_WORDS gives the
    position of the interrupted proposal's first word; _BIG a proposal beyond ymax whose
    acceptance test the caller runs in Python integers from the returned position.
    """
    den = 2 * t * a * q
    i = start
    while i < len(out):
        first = pos
        y, pos, status = _laplace_proposal(t, 1, words, pos)
        if status == _NEED_WORDS:
            return _NEED_WORDS, i, first, 0
        if status != _DONE:
            return status, i, pos, 0
        if abs(y) > ymax:
            return _BIG, i, pos, y
        w = q * abs(y) - a
        c, pos = _bern_exp(w * w, den, words, pos)
        if c < 0:
            return _NEED_WORDS, i, first, 0
        if c == 1:
            out[i] = y
            i += 1
    return _DONE, i, pos, 0


# ---------------------------------------------------------------- Python-integer reference

def ref_below(n: int, next_word: Callable[[], int]) -> int:
    lim = _MAXW - (((_MAXW % n) + 1) % n)
    while True:
        w = next_word()
        if w <= lim:
            return w % n


def ref_bern_exp(num: int, den: int, next_word: Callable[[], int]) -> int:
    """Bernoulli(exp(-num/den)) in Python integers, consuming words exactly as the kernel does."""
    while num > den:
        if ref_bern_exp(1, 1, next_word) == 0:
            return 0
        num -= den
    k = 1
    while True:
        if num == 0:
            accept = False
        elif num == den:
            accept = True
        else:
            accept = ref_below(den, next_word) < num
        if accept and k > 1:
            accept = ref_below(k, next_word) == 0
        if not accept:
            return k % 2
        k += 1


def ref_laplace(t: int, s: int, next_word: Callable[[], int]) -> int:
    while True:
        u = ref_below(t, next_word) if t > 1 else 0
        if ref_bern_exp(u, t, next_word) == 0:
            continue
        v = 0
        while ref_bern_exp(1, 1, next_word) == 1:
            v += 1
        y = (u + t * v) // s
        sign = ref_below(2, next_word)
        if sign == 1 and y == 0:
            continue
        return y if sign == 0 else -y


def ref_gaussian(t: int, a: int, q: int, next_word: Callable[[], int]) -> int:
    while True:
        y = ref_laplace(t, 1, next_word)
        w = q * abs(y) - a
        if ref_bern_exp(w * w, 2 * t * a * q, next_word) == 1:
            return y


# ---------------------------------------------------------------- word stream and drivers

def draw_words(rng: np.random.Generator, n: int) -> np.ndarray:
    """n uniform 63-bit words (int64 >= 0) from the generator's raw 64-bit output."""
    return (rng.bit_generator.random_raw(n) >> np.uint64(1)).astype(np.int64)


class WordStream:
    """Words read in order from a buffer that refills from ``rng`` (for the Python path)."""

    def __init__(self, words: np.ndarray, pos: int, rng: np.random.Generator, chunk: int):
        self.words, self.pos, self.rng, self.chunk = words, pos, rng, chunk

    def __call__(self) -> int:
        if self.pos >= len(self.words):
            self.words, self.pos = draw_words(self.rng, self.chunk), 0
        w = int(self.words[self.pos])
        self.pos += 1
        return w


Kernel = Callable[[np.ndarray, int, np.ndarray, int], tuple[int, int, int, int]]
"""A sampling kernel: (out, first index, words, position) -> (status, next index, position, big value)."""


def _drive(kernel: Kernel, n: int, rng: np.random.Generator, chunk: int | None,
           big_test: Callable[[int, WordStream], bool] | None = None) -> np.ndarray:
    chunk = chunk or min(CHUNK_WORDS, WORDS_PER_SAMPLE * n + 64)
    out = np.zeros(n, dtype=np.int64)
    words, pos, i = draw_words(rng, chunk), 0, 0
    while True:
        status, i, pos, y = kernel(out, i, words, pos)
        if status == _DONE:
            return out
        if status == _NEED_WORDS:
            words, pos = np.concatenate([words[pos:], draw_words(rng, chunk)]), 0
        elif status == _BIG:
            if big_test is None:
                raise ValueError("a kernel that asks for a big-value test needs one")
            stream = WordStream(words, pos, rng, chunk)
            if big_test(y, stream):
                out[i] = y
                i += 1
            words, pos = stream.words, stream.pos
        else:  # a geometric run of ~1e10 successes of probability 1/e: never in practice
            raise OverflowError("discrete Laplace proposal overflowed int64")


@dataclass(frozen=True)
class GaussianParameters:
    """sigma^2 = t*a/q exactly, with t = floor(sigma)+1, q = 2**k, a rounded up."""

    t: int
    a: int
    q: int
    ymax: int

    @property
    def sigma(self) -> float:
        return math.sqrt(self.t * self.a / self.q)


def gaussian_parameters(sigma: float) -> GaussianParameters:
    """Integer parameters of the sampler for scale ``sigma``: the variance t*a/q is >= sigma**2 and
    within t/q of it (a relative excess of sigma below 1e-7 from sigma = 0.5 on)."""
    if not 0 < sigma <= SIGMA_MAX:
        raise ValueError(f"discrete Gaussian needs 0 < sigma <= {SIGMA_MAX:g}, got {sigma}")
    t = math.floor(sigma) + 1
    k = max(0, math.floor(math.log2((1 << _WORD_BITS_FOR_W) / (_TAIL_SIGMAS * t))))
    q = 1 << k
    a = math.ceil(Fraction(sigma) ** 2 * q / t)
    ymax = ((1 << _WORD_BITS_FOR_W) + a) // q
    assert 2 * t * a * q < (1 << 62) and a <= (1 << _WORD_BITS_FOR_W)
    return GaussianParameters(t, a, q, ymax)


def discrete_gaussian(p: GaussianParameters, n: int, rng: np.random.Generator, chunk: int | None = None,
                      ymax: int | None = None) -> np.ndarray:
    """n i.i.d. draws, P(y) ∝ exp(-y²/(2·p.sigma²)) on the integers (p from ``gaussian_parameters``).

    ``ymax`` (tests only) lowers the proposal size above which the acceptance test runs in
    Python integers; the samples do not depend on it, nor on ``chunk``.
    """
    limit = p.ymax if ymax is None else min(ymax, p.ymax)

    def kernel(out: np.ndarray, i: int, words: np.ndarray, pos: int) -> tuple[int, int, int, int]:
        state: tuple[int, int, int, int] = _gaussian_kernel(out, i, p.t, p.a, p.q, limit, words, pos)
        return state

    def big_test(y: int, stream: WordStream) -> bool:
        w = p.q * abs(y) - p.a
        return ref_bern_exp(w * w, 2 * p.t * p.a * p.q, stream) == 1

    return _drive(kernel, n, rng, chunk, big_test)


def discrete_laplace(t: int, s: int, n: int, rng: np.random.Generator, chunk: int | None = None) -> np.ndarray:
    """n i.i.d. draws, P(y) ∝ exp(-|y|·s/t) on the integers (scale t/s, integers t, s >= 1).

    The proposal of the Gaussian sampler; as a mechanism, scale Δ₁/ε gives pure ε-DP.
    """
    if t < 1 or s < 1:
        raise ValueError("discrete Laplace needs integers t, s >= 1")
    return _drive(lambda out, i, words, pos: _laplace_kernel(out, i, t, s, words, pos), n, rng, chunk)
