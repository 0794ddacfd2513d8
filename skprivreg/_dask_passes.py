"""A pass over the row chunks of a Dask array: the task graph of :meth:`RowSource.reduce`.

Two shapes of graph, both reading every chunk once, on the workers:

* **chunks held by workers** (a persisted array on a ``distributed`` cluster
  that runs the graph): one task per worker thread, over the chunks that
  worker holds, which folds their partials in row order
  (:class:`_BlocksTask`). No chunk of X moves (labels held elsewhere, or
  rechunked to X's rows, are fetched). A pass costs the scheduler a few
  tasks instead of one per chunk and one per fold: measured on a 2-worker
  ``LocalCluster`` at n = 1e6, d = 10 in 8 chunks, an SSP fit went from
  1.7-2.2x to 1.4-1.75x the NumPy fit, and an 8-round ``LinearRegression``
  from 2.4-3.0x to 1.4-2.0x (ranges over repeated runs, with
  :func:`chunk_tasks` shared by a fit's passes);
* **any other graph** (chunks computed from files or other collections,
  Dask's local schedulers): one task per chunk, the partials merged by
  :func:`tree_reduce`, so each chunk is read by the worker that makes it.

Either way the partials are combined on the driver only when at most
:data:`DRIVER_FOLD_MAX_BLOCKS` reach it. A task folds chunks that need not be
adjacent (a worker's chunks 0, 2 and 5) and the partials of interleaved
groups are combined, so block functions and combines must not depend on the
order of rows (sums, merges ranked by global row index): the result is the
NumPy one up to float64 summation order, which, with chunks grouped by
worker, follows where the chunks are held. Task keys are random
names, never tokens of the data or of a pass's parameters.
"""

import uuid

import numpy as np

from ._threads import single_threaded_blas

__all__ = ["DRIVER_FOLD_MAX_BLOCKS", "TREE_FAN_IN", "chunk_tasks", "reduce_chunks",
           "tree_reduce", "worker_groups"]

#: Partials merged by one task of :func:`tree_reduce`: a wide, shallow tree
#: (each task costs the scheduler about a millisecond and a transfer).
TREE_FAN_IN = 8
#: At most this many partials are folded on the driver; more are folded on
#: the workers by :func:`tree_reduce`, so that one partial reaches the driver.
DRIVER_FOLD_MAX_BLOCKS = 2


class _FoldInOrder:
    """``combine`` folded left over a task's partials, in row order (picklable)."""

    def __init__(self, combine):
        self.combine = combine

    def __call__(self, *parts):
        total = parts[0]
        with np.errstate(all="ignore"):  # a worker's floating-point state is its own
            for part in parts[1:]:
                total = self.combine(total, part)
        return total


def _key(name):
    return f"skprivreg-{name}-{uuid.uuid4().hex}"


def tree_reduce(parts, combine, fan_in=TREE_FAN_IN):
    """Merge delayed partials by delayed folds of up to ``fan_in`` partials each (order kept).

    The last fold runs on a worker too: only the reduced statistic reaches the
    driver (partials can be large, ``d x d`` or ``d x l``).
    """
    import dask

    fold = _FoldInOrder(combine)
    while len(parts) > 1:
        parts = [
            dask.delayed(fold, pure=False)(*parts[i:i + fan_in], dask_key_name=_key("fold"))
            if len(parts[i:i + fan_in]) > 1 else parts[i]
            for i in range(0, len(parts), fan_in)
        ]
    return parts[0]


class _BlocksTask:
    """One task over several chunks: their block function's partials, folded in row order.

    Called as ``task(params, X_1, ..., X_k, Y_1, ..., Y_k)``; ``run`` prepares
    each raw chunk and applies ``fn`` (``_run_block`` or ``_call_raw`` of
    :mod:`skprivreg._rows`), accumulating into the running partial.
    """

    def __init__(self, run, fn, offsets, clip, check_finite, sizes):
        self.run = run
        self.fn = fn
        self.offsets = [int(o) for o in offsets]
        self.clip = clip
        self.check_finite = check_finite
        self.sizes = [int(size) for size in sizes]

    def __call__(self, params, *blocks):
        k = len(self.offsets)
        total = None
        # No floating-point warning on the worker either (see ``base.quiet_floats``);
        # BLAS on one thread, as in a threaded pass (:mod:`skprivreg._threads`).
        with np.errstate(all="ignore"), single_threaded_blas():
            for offset, size, X_b, Y_b in zip(self.offsets, self.sizes, blocks[:k], blocks[k:]):
                _check_chunk_rows(X_b, Y_b, size)
                total = self.run(self.fn, offset, X_b, Y_b, self.clip, self.check_finite,
                                 params, total)
        return total


def _check_chunk_rows(X_b, Y_b, size):
    """Refuse a chunk whose rows are not the ``size`` its metadata declares.

    The number of rows is public in every guarantee: a graph whose chunks hold
    another number of rows than declared (a filter inside ``map_blocks``, a
    wrong ``from_delayed`` shape, a file that gained rows) would sum rows the
    plan did not count."""
    for block in (X_b, Y_b):
        if block is not None and np.shape(block)[0] != size:
            # The count the chunk holds is not named: a filter's exact count.
            raise ValueError(
                f"A Dask chunk does not hold the {size} rows its metadata declares: the "
                "number of rows must be known before the fit (compute the chunk sizes "
                "of a graph that selects rows)."
            )


def _cluster_client(collection):
    """The ``distributed`` client that would compute ``collection``, or None."""
    try:
        from dask.base import get_scheduler
        from distributed import Client
    except ImportError:
        return None
    scheduler = get_scheduler(collections=[collection])
    client = getattr(scheduler, "__self__", None)
    return client if isinstance(client, Client) else None


def worker_groups(X):
    """Row-chunk indices of ``X`` grouped by the worker thread that runs them, or None.

    Only for an array in one column chunk whose every row chunk is held in a
    worker's memory on the ``distributed`` cluster that computes it
    (``X.persist()``, once the chunks are computed). A chunk held by several
    workers goes to the one given the fewest chunks so far. Each worker's
    chunks, in row order, are split into as many runs of consecutive chunks
    as it has threads; the groups are sorted by their first chunk. None
    otherwise (some chunk must be computed, no cluster, or the cluster does
    not answer): then every chunk is its own task.
    """
    client = _cluster_client(X)
    if client is None or X.ndim != 2 or X.numblocks[1] != 1:
        return None
    keys = [key for (key,) in X.__dask_keys__()]
    if not set(keys) <= {future.key for future in client.futures_of(X)}:
        return None  # some chunk is computed by the graph: nothing to ask the scheduler
    try:
        held = client.who_has(X)
        threads = client.nthreads()
    except Exception:  # noqa: BLE001 - placement only saves time; any failure: one task per chunk
        return None
    by_worker = {}
    for index, key in enumerate(keys):
        workers = sorted(held.get(key, ()))
        if not workers:
            return None
        worker = min(workers, key=lambda w: len(by_worker.get(w, ())))
        by_worker.setdefault(worker, []).append(index)
    groups = []
    for worker, indices in sorted(by_worker.items()):
        k = max(1, min(int(threads.get(worker, 1)), len(indices)))
        size, extra = divmod(len(indices), k)
        start = 0
        for j in range(k):
            stop = start + size + (j < extra)
            groups.append(indices[start:stop])
            start = stop
    return sorted(groups, key=lambda group: group[0])


def chunk_tasks(X, Y=None):
    """The delayed row chunks of ``X`` and ``Y`` (``Y`` None: a list of None), for
    :func:`reduce_chunks`; a fit's passes share them (the graph is optimised once).

    Arrays whose graphs share tasks (``X`` and ``Y`` sliced from one array,
    or read by one loader) keep their graphs as they are: optimising each
    on its own fuses the shared tasks into both, which then run twice a pass
    (each file read twice).
    """
    optimize = Y is None or set(X.__dask_graph__()).isdisjoint(Y.__dask_graph__())
    x_blocks = list(X.to_delayed(optimize_graph=optimize).ravel())
    y_blocks = ([None] * len(x_blocks) if Y is None
                else list(Y.to_delayed(optimize_graph=optimize).ravel()))
    return x_blocks, y_blocks


def reduce_chunks(blocks, offsets, run, fn, combine, params, clip, check_finite, groups=None,
                  sizes=None):
    """One pass of ``fn`` over row chunks of a Dask array (and its labels).

    ``blocks``: the :func:`chunk_tasks` of the arrays; ``offsets`` are the
    chunks' first rows and ``sizes`` their declared numbers of rows (each
    chunk is refused unless it holds them); ``run(fn, offset, X_b, Y_b, clip, check_finite,
    params, into)`` applies the block function to one raw chunk; ``groups``:
    the chunks of each task (:func:`worker_groups`), None for one task per
    chunk. Returns the combined partial, computed on the workers.
    """
    import dask

    x_blocks, y_blocks = blocks
    # Parameters are one shared task (pickled once); no parameters, no task
    # (a task that every block waits for, run on one worker and sent to
    # the others: measured 83-92 ms against 93-113 ms for a two-pass fit).
    params_task = (None if params is None
                   else dask.delayed(params, traverse=False, name=_key("params")))
    if groups is None:
        groups = [[i] for i in range(len(x_blocks))]
    parts = [
        dask.delayed(_BlocksTask(run, fn, [offsets[i] for i in group], clip, check_finite,
                                 [sizes[i] for i in group]),
                     pure=False)(params_task, *[x_blocks[i] for i in group],
                                 *[y_blocks[i] for i in group], dask_key_name=_key("pass"))
        for group in groups
    ]
    # The chunks' graph was optimised once, by chunk_tasks.
    if len(parts) <= DRIVER_FOLD_MAX_BLOCKS:
        # One round trip fewer: no partial moves between workers. Measured
        # on 2 workers, 2 chunks: a one-round LinearRegression fit took
        # 50-59 ms against 64-72 ms with the fold on a worker.
        return _FoldInOrder(combine)(*dask.compute(*parts, optimize_graph=False))
    return tree_reduce(parts, combine).compute(optimize_graph=False)
