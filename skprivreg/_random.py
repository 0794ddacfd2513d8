"""Randomness: fresh OS entropy for every secret draw, and the testing facility.

Two kinds of randomness enter a private fit.

Secret draws
    Noise (Gaussian, Laplace, Gumbel), PTR draws, AboveThreshold noise, secret
    weights, and any subsample whose secrecy an amplification argument relies
    on. For a finite epsilon these come from :func:`secret_generators`, which
    seeds every call from 256 bits of fresh operating-system entropy
    (:func:`secrets.randbits`) and ignores ``random_state``. Nothing a user or
    an attacker holds (a seed, a pickled :class:`numpy.random.Generator`, a
    clone of the estimator) reproduces them, so every fit inside
    ``GridSearchCV`` or ``cross_val_score`` draws independent noise, which is
    what the composition theorems assume.

Released randomness
    Randomness whose outcome is public anyway (a released bag partition, a
    public group partition, the initialisation of post-processing) keeps its
    scikit-learn meaning: :func:`public_generators` seeds it from
    ``random_state``.

Reproducible noise for tests
    :func:`reproducible_noise` is the only way to make secret draws
    repeatable. It is a testing facility in the style of
    :func:`sklearn.config_context`: inside it, secret generators are derived
    from its ``seed`` and the estimator's ``random_state``, a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning` is emitted once on
    entry, and every estimator fitted inside records
    ``noise_reproducible_ = True`` and a ledger marked not for publication.
    The setting is local to the thread (and :mod:`contextvars` context) that
    entered the block: fits running in other threads at the same time keep
    drawing from OS entropy. Whether a fit's noise is reproducible is decided
    once, when its secret generators are created, and that same decision
    marks the fit.
"""

import contextlib
import contextvars
import numbers
import os
import secrets
import threading
import warnings

import numpy as np

from .exceptions import PrivacyLeakWarning

__all__ = [
    "ENTROPY_BITS",
    "fresh_seed_sequence",
    "seed_sequence",
    "public_generators",
    "secret_generators",
    "secret_seed_sequence",
    "SpendFirstGenerator",
    "reproducible_noise",
    "noise_is_reproducible",
]

#: Bits of operating-system entropy behind every secret draw.
ENTROPY_BITS = 256

#: ``(seed, pid)`` of the active reproducible_noise block of this context, or None.
_testing_seed_var = contextvars.ContextVar("skprivreg_reproducible_noise_seed",
                                          default=None)
_calls = {"n": 0}
_lock = threading.Lock()


def fresh_seed_sequence():
    """A :class:`numpy.random.SeedSequence` from 256 bits of OS entropy."""
    return np.random.SeedSequence(secrets.randbits(ENTROPY_BITS))


def seed_sequence(random_state):
    """A :class:`numpy.random.SeedSequence` for *released* randomness.

    - ``None``: fresh OS entropy (256 bits).
    - ``int``: that seed.
    - :class:`numpy.random.Generator`: 256 bits drawn from it (the generator
      advances, so repeated fits get different public randomness).
    - :class:`numpy.random.RandomState`: 256 bits drawn from it.

    Never used for noise or any other secret draw.
    """
    if random_state is None:
        return fresh_seed_sequence()
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return np.random.SeedSequence(int(random_state))
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(
            [int(v) for v in random_state.integers(0, 2**32, size=8, dtype=np.uint64)]
        )
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(
            [int(v) for v in random_state.randint(0, 2**31, size=9)]
        )
    raise ValueError(
        "random_state must be None, an int, a numpy.random.Generator or a "
        "numpy.random.RandomState."
    )


def _spawn(root, purposes):
    purposes = list(purposes)
    if len(set(purposes)) != len(purposes):
        raise ValueError("Each purpose needs its own stream; got a repeated purpose.")
    children = root.spawn(len(purposes))
    return {
        purpose: np.random.Generator(np.random.PCG64(child))
        for purpose, child in zip(purposes, children)
    }


def public_generators(random_state, purposes):
    """Independent PCG64 generators, one per purpose, seeded from ``random_state``.

    For randomness whose outcome is released or public anyway. Each purpose
    gets its own child of one :class:`~numpy.random.SeedSequence`, so two
    purposes never share a stream.
    """
    return _spawn(seed_sequence(random_state), purposes)


def _testing_seed():
    """The seed of the active block, or None: also in a process forked inside the block,
    which inherits the context variable (and the call counter) and would repeat the
    parent's next streams; process workers draw fresh OS entropy."""
    active = _testing_seed_var.get()
    if active is None or active[1] != os.getpid():
        return None
    return active[0]


def noise_is_reproducible():
    """Whether the reproducible-noise testing facility is active in this context.

    Only the thread (and :mod:`contextvars` context) inside a
    :func:`reproducible_noise` block sees it active.
    """
    return _testing_seed() is not None


def _reproducible_root(seed, random_state):
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return np.random.SeedSequence([int(seed), 1, int(random_state)])
    if isinstance(random_state, np.random.Generator | np.random.RandomState):
        return np.random.SeedSequence([int(seed), 2,
                                       *seed_sequence(random_state).generate_state(4)])
    with _lock:
        _calls["n"] += 1
        calls = _calls["n"]
    return np.random.SeedSequence([int(seed), 3, calls])


def secret_seed_sequence(random_state=None):
    """The root :class:`~numpy.random.SeedSequence` of one fit's secret draws.

    Fresh OS entropy (256 bits) outside :func:`reproducible_noise` (as seen
    from the calling thread's context), whatever ``random_state`` is; for
    code that derives its own children from a root (e.g. one noise stream
    per chunk of outcomes).
    """
    seed = _testing_seed()
    if seed is None:
        return fresh_seed_sequence()
    return _reproducible_root(seed, random_state)


class SpendFirstGenerator:
    """A :class:`numpy.random.Generator` that runs ``before`` ahead of its first draw.

    Estimators hand these to mechanisms so that the fit's spend is recorded
    before any noise is drawn, whatever the order of data passes and
    releases; ``before`` is a one-shot callable shared by the generators of
    one fit. Access to a public attribute is forwarded to the wrapped
    generator (a private or special name raises ``AttributeError``, spending
    nothing); after the fit has ended it raises ``RuntimeError``.
    """

    __slots__ = ("_rng", "_before")

    def __init__(self, rng, before):
        self._rng = rng
        self._before = before

    def __getattr__(self, name):
        if name.startswith("_"):
            # A protocol probe (copy, deepcopy, a pretty-printer's hasattr of
            # __rich_repr__ or _repr_pretty_) is no draw: it neither spends nor
            # reaches the generator, whose draws are all public methods.
            raise AttributeError(name)
        self._before()
        return getattr(self._rng, name)

    def __reduce__(self):
        raise TypeError("A generator of secret draws is never pickled.")


def secret_generators(purposes, random_state=None):
    """Independent PCG64 generators for secret draws, one per purpose.

    Outside :func:`reproducible_noise`, every call seeds a fresh
    :class:`~numpy.random.SeedSequence` from 256 bits of OS entropy and
    ``random_state`` is ignored. Inside it, the generators are derived from
    the facility's seed and ``random_state`` (an int gives the same noise on
    every fit; ``None`` a new stream per call), for tests only.
    """
    return _spawn(secret_seed_sequence(random_state), purposes)


@contextlib.contextmanager
def reproducible_noise(seed=0):
    """Testing facility: make every secret draw reproducible inside the block.

    Secret generators are derived from ``seed`` and each estimator's
    ``random_state``, so two fits with the same integer ``random_state``
    draw the same noise. This voids the privacy guarantee of everything
    fitted inside: the block emits a
    :class:`~skprivreg.exceptions.PrivacyLeakWarning` on entry, and every
    estimator fitted inside sets ``noise_reproducible_ = True`` and marks its
    ledger ``for_publication=False``. Use it in tests and documentation
    examples that need fixed numbers; never on data you will publish from.

    The setting holds in the thread (and :mod:`contextvars` context) that
    entered the block, until it leaves. Other threads, including worker
    threads started inside the block (a thread pool, joblib's threading
    backend), and process workers draw fresh OS entropy and mark their fits
    as usual.

    Parameters
    ----------
    seed : int, default=0
        Root of the reproducible secret streams.

    Examples
    --------
    >>> import warnings
    >>> from skprivreg.testing import reproducible_noise
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with reproducible_noise(0):
    ...         pass
    """
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0:
        raise ValueError("seed must be a non-negative int.")
    warnings.warn(
        "reproducible_noise: the noise of every fit in this block can be "
        "reproduced from its seed; nothing fitted here is differentially "
        "private or fit for publication (testing facility).",
        PrivacyLeakWarning,
        stacklevel=3,
    )
    previous = _testing_seed_var.get()
    token = _testing_seed_var.set((int(seed), os.getpid()))
    try:
        yield
    finally:
        try:
            _testing_seed_var.reset(token)
        except ValueError:  # left in another context than the one entered
            _testing_seed_var.set(previous)
