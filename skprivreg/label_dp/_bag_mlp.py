"""A small numpy MLP trained on the weighted bag loss of noisy weighted LLP.

scikit-learn's ``MLPRegressor`` cannot take a custom loss, and the LLP
output only constrains weighted sums of predictions over a bag:

.. math::
    J = \\frac{1}{2|B|}\\sum_{j\\in B}\\frac{1}{k} e_j^2
        + \\frac{\\alpha}{2|B|}\\sum_l \\lVert W_l \\rVert_F^2,
    \\qquad e_j = \\sum_{r=1}^k w_{jr} f(x_{i_{jr}}) - \\bar y_j,

so the upstream gradient of instance ``(j, r)`` is
``dJ/df(x_{i_jr}) = e_j w_jr / (k |B|)`` and one forward/backward pass over
the ``|B| k`` instances of a batch gives the exact gradient. ReLU hidden
layers, Glorot-uniform initialisation (as sklearn), Adam with cosine decay
of the learning rate to 1e-3 of its initial value, early stopping on a
validation fraction of the bags. Parameter names follow ``MLPRegressor``.

Training is post-processing of the released LLP dataset: it has no privacy
cost of its own.
"""

import math

import numpy as np

__all__ = ["_BagMLP", "MLP_PARAM_NAMES"]

MLP_PARAM_NAMES = (
    "hidden_layer_sizes",
    "alpha",
    "batch_size",
    "learning_rate_init",
    "max_iter",
    "early_stopping",
    "validation_fraction",
    "n_iter_no_change",
    "tol",
    "beta_1",
    "beta_2",
    "epsilon",
)


class _BagMLP:
    """ReLU network ``f: R^d -> R`` fitted on bag-level weighted sums.

    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default=(128, 64)
    alpha : float, default=1e-4
        L2 penalty (as ``MLPRegressor``).
    batch_size : int or 'auto', default='auto'
        Bags per mini-batch; ``'auto'`` is ``min(256, n_bags)``.
    learning_rate_init : float, default=1e-3
    max_iter : int, default=200
        Epochs; the learning rate follows a cosine from its initial value
        to 1e-3 of it over ``max_iter`` epochs.
    early_stopping : bool, default=True
    validation_fraction : float, default=0.1
        Fraction of the bags held out for early stopping.
    n_iter_no_change : int, default=3
    tol : float, default=1e-6
        Minimum relative improvement of the validation bag loss.
    beta_1, beta_2, epsilon : float
        Adam constants.
    random_state : numpy.random.Generator or int or None
        Used when :meth:`fit` is given no generator.
    """

    def __init__(
        self,
        hidden_layer_sizes=(128, 64),
        alpha=1e-4,
        batch_size="auto",
        learning_rate_init=1e-3,
        max_iter=200,
        early_stopping=True,
        validation_fraction=0.1,
        n_iter_no_change=3,
        tol=1e-6,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-8,
        random_state=None,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.alpha = alpha
        self.batch_size = batch_size
        self.learning_rate_init = learning_rate_init
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.random_state = random_state

    # -- network ---------------------------------------------------------
    def _init_params(self, n_in, rng):
        sizes = [n_in, *[int(h) for h in self.hidden_layer_sizes], 1]
        self.coefs_, self.intercepts_ = [], []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = math.sqrt(6.0 / (fan_in + fan_out))
            self.coefs_.append(rng.uniform(-bound, bound, (fan_in, fan_out)))
            self.intercepts_.append(rng.uniform(-bound, bound, fan_out))

    def _forward(self, H):
        activations = [H]
        for layer, (W, b) in enumerate(zip(self.coefs_, self.intercepts_)):
            H = H @ W + b
            if layer < len(self.coefs_) - 1:
                H = np.maximum(H, 0.0)
            activations.append(H)
        return activations

    def _backward(self, activations, upstream):
        """Gradients of ``sum(upstream * f)`` w.r.t. all parameters."""
        grads_W = [None] * len(self.coefs_)
        grads_b = [None] * len(self.coefs_)
        delta = upstream[:, None]
        for layer in range(len(self.coefs_) - 1, -1, -1):
            grads_W[layer] = activations[layer].T @ delta
            grads_b[layer] = delta.sum(axis=0)
            if layer > 0:
                delta = (delta @ self.coefs_[layer].T) * (activations[layer] > 0)
        return grads_W, grads_b

    def _bag_loss_and_grads(self, Xb, Wb, yb):
        """Objective ``J`` of one batch and its gradients."""
        n_bags, k, d = Xb.shape
        activations = self._forward(Xb.reshape(-1, d))
        f = activations[-1].reshape(n_bags, k)
        e = np.einsum("jr,jr->j", Wb, f) - yb
        penalty = sum(float(np.sum(W * W)) for W in self.coefs_)
        loss = 0.5 * np.sum(e * e) / (k * n_bags) + 0.5 * self.alpha * penalty / n_bags
        upstream = (e[:, None] * Wb / (k * n_bags)).ravel()
        grads_W, grads_b = self._backward(activations, upstream)
        for layer, W in enumerate(self.coefs_):
            grads_W[layer] = grads_W[layer] + self.alpha * W / n_bags
        return loss, grads_W, grads_b

    def _bag_mse(self, Xb, Wb, yb):
        n_bags, k, d = Xb.shape
        f = self._forward(Xb.reshape(-1, d))[-1].reshape(n_bags, k)
        e = np.einsum("jr,jr->j", Wb, f) - yb
        return float(np.mean(e * e) / k)

    # -- public API ------------------------------------------------------
    def fit(self, X_bags, weights, y_agg, label_scale=1.0, rng=None):
        """Fit on bags.

        Parameters
        ----------
        X_bags : ndarray (m, k, d)
            Public features of each bag's members.
        weights : ndarray (m, k)
            The released LLP weights.
        y_agg : ndarray (m,)
            The released (noisy) weighted label sums.
        label_scale : float
            Targets are divided by it internally (the label range) and
            predictions multiplied back.
        rng : numpy.random.Generator or None
            The generator of this fit (initialisation, validation split,
            batch order); used, never stored. ``None``: from
            ``random_state``.
        """
        if rng is None:
            rng = (
                self.random_state
                if isinstance(self.random_state, np.random.Generator)
                else np.random.default_rng(self.random_state)
            )
        X_bags = np.asarray(X_bags, dtype=np.float64)
        weights = np.asarray(weights, dtype=np.float64)
        m, k, d = X_bags.shape
        flat = X_bags.reshape(-1, d)
        self.x_mean_ = flat.mean(axis=0)
        scale = flat.std(axis=0)
        self.x_scale_ = np.where(scale > 0, scale, 1.0)
        self.label_scale_ = float(label_scale)
        Xs = (X_bags - self.x_mean_) / self.x_scale_
        ys = np.asarray(y_agg, dtype=np.float64) / self.label_scale_
        self._init_params(d, rng)

        order = rng.permutation(m)
        n_val = int(round(self.validation_fraction * m)) if self.early_stopping else 0
        n_val = min(n_val, m - 1)
        val, train = order[:n_val], order[n_val:]
        batch = min(256, train.size) if self.batch_size == "auto" else int(self.batch_size)
        batch = max(1, min(batch, train.size))

        params = [*self.coefs_, *self.intercepts_]
        first = [np.zeros_like(p) for p in params]
        second = [np.zeros_like(p) for p in params]
        step = 0
        best, best_params, stall = math.inf, None, 0
        self.loss_curve_, self.validation_scores_ = [], []
        n_layers = len(self.coefs_)
        for epoch in range(int(self.max_iter)):
            lr = self.learning_rate_init * (
                1e-3 + (1 - 1e-3) * 0.5 * (1 + math.cos(math.pi * epoch / self.max_iter))
            )
            perm = rng.permutation(train)
            epoch_loss = 0.0
            for start in range(0, perm.size, batch):
                idx = perm[start : start + batch]
                loss, gW, gb = self._bag_loss_and_grads(Xs[idx], weights[idx], ys[idx])
                epoch_loss += loss * idx.size
                step += 1
                grads = [*gW, *gb]
                for i, (p, g) in enumerate(zip(params, grads)):
                    first[i] = self.beta_1 * first[i] + (1 - self.beta_1) * g
                    second[i] = self.beta_2 * second[i] + (1 - self.beta_2) * g * g
                    m_hat = first[i] / (1 - self.beta_1**step)
                    v_hat = second[i] / (1 - self.beta_2**step)
                    p -= lr * m_hat / (np.sqrt(v_hat) + self.epsilon)
            self.loss_curve_.append(epoch_loss / perm.size)
            self.n_iter_ = epoch + 1
            if n_val > 0:
                score = self._bag_mse(Xs[val], weights[val], ys[val])
                self.validation_scores_.append(score)
                if score < best * (1 - self.tol):
                    best, stall = score, 0
                    best_params = [p.copy() for p in params]
                else:
                    stall += 1
                    if stall >= self.n_iter_no_change:
                        break
        if best_params is not None:
            for p, saved in zip(params, best_params):
                p[...] = saved
        self.coefs_ = params[:n_layers]
        self.intercepts_ = params[n_layers:]
        return self

    def predict(self, X):
        """``f(X)`` in label units."""
        Xs = (np.asarray(X, dtype=np.float64) - self.x_mean_) / self.x_scale_
        return self._forward(Xs)[-1][:, 0] * self.label_scale_
