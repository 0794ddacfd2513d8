"""A budget store shared by processes: an append-only log under a file lock.

:class:`~skprivreg.accounting.BudgetAccountant` with ``processes=True`` keeps
its spends here, so that copies of the accountant in joblib's process workers
(``GridSearchCV(n_jobs=-1)``, ``cross_val_score(n_jobs=2)``) check and record
their spends on one budget. Each check-and-spend holds an exclusive lock on
the file (``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows), reads the
records other processes appended since its last read, decides, and appends
its own record before it releases the lock: the check and the spend are one
atomic step across processes, as they are across threads.

The log holds JSON lines, one per record, never pickles (reading the log
executes nothing):

- ``{"op": "spend", "id": ..., "ledger": {...}}``: a ledger was spent;
- ``{"op": "amend", "id": ..., "ledger": {...}}``: the spend ``id`` was
  replaced by its final ledger (same guarantee, see ``BudgetAccountant._amend``).

The file is created with mode 0600 in the temporary directory and removed
when the accountant that created it is garbage collected; copies in other
processes never remove it.
"""

import contextlib
import dataclasses
import json
import os
import tempfile
import uuid
import weakref

__all__ = ["FileBudgetStore"]

try:  # POSIX
    import fcntl

    def _lock(handle):
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)

    def _unlock(handle):
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

except ImportError:  # pragma: no cover - Windows
    import msvcrt

    def _lock(handle):
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)

    def _unlock(handle):
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)


def _ledger_to_json(ledger):
    return {
        "composition": ledger.composition,
        "delta": ledger._delta,
        "gaussian_epsilon": getattr(ledger, "gaussian_epsilon", None),
        "for_publication": bool(ledger.for_publication),
        "events": [dataclasses.asdict(event) for event in ledger.events],
    }


def _ledger_from_json(record):
    from .accounting import PrivacyEvent, PrivacyLedger

    ledger = PrivacyLedger(
        [PrivacyEvent(**event) for event in record["events"]],
        composition=record["composition"],
        delta=record["delta"],
        gaussian_epsilon=record.get("gaussian_epsilon"),
    )
    ledger.for_publication = record["for_publication"]
    return ledger


def _remove(path, owner):
    """Remove the log, in the process that created it only: a child forked from it
    runs the finalizer too when it exits, and the parent's budget lives on."""
    if os.getpid() != owner:
        return
    with contextlib.suppress(OSError):
        os.remove(path)


class FileBudgetStore:
    """The spends of one budget, in a lock-protected append-only file.

    Parameters
    ----------
    path : str or None
        The log to attach to; ``None`` creates a new one (and removes it when
        this object is garbage collected).
    """

    def __init__(self, path=None):
        if path is None:
            fd, path = tempfile.mkstemp(prefix="skprivreg-budget-", suffix=".jsonl")
            os.close(fd)
            self._finalizer = weakref.finalize(self, _remove, path, os.getpid())
        elif not os.path.exists(path):
            raise FileNotFoundError(
                f"The budget store {path!r} no longer exists: the BudgetAccountant that "
                "created it was garbage collected. Spends cannot be recorded."
            )
        self.path = path
        self._offset = 0
        self._records = {}  # id -> ledger, in spend order
        self._ids = weakref.WeakKeyDictionary()  # ledger spent by this process -> id

    @contextlib.contextmanager
    def locked(self):
        """Hold the file lock and bring the records up to date; yields the handle."""
        gone = FileNotFoundError(
            f"The budget store {self.path!r} no longer exists: the BudgetAccountant "
            "that created it was garbage collected. Nothing was spent."
        )
        try:  # never created here: a removed log must not come back empty
            fd = os.open(self.path, os.O_RDWR | getattr(os, "O_BINARY", 0))
        except FileNotFoundError:
            raise gone from None
        with open(fd, "a+", encoding="utf-8") as handle:
            _lock(handle)
            try:
                # Removed or cut short between the open and the lock: its
                # records (other processes' spends) are lost, so refuse.
                stat = os.fstat(handle.fileno())
                if stat.st_nlink == 0:
                    raise gone
                if stat.st_size < self._offset:
                    raise RuntimeError(
                        f"The budget store {self.path!r} was cut short: spends recorded "
                        "in it are lost. Nothing was spent."
                    )
                self._sync(handle)
                yield handle
            finally:
                handle.flush()
                _unlock(handle)

    def _sync(self, handle):
        handle.seek(self._offset)
        for line in handle:
            if not line.endswith("\n"):  # never happens under the lock
                raise RuntimeError("The budget store holds an incomplete record.")
            self._apply(json.loads(line))
        self._offset = handle.tell()

    def _apply(self, record):
        ledger = _ledger_from_json(record["ledger"])
        if record["op"] in ("spend", "amend"):
            self._records[record["id"]] = ledger
        else:
            raise RuntimeError(f"Unknown budget store record {record['op']!r}.")

    def _append(self, handle, record, ledger):
        handle.seek(0, os.SEEK_END)
        handle.write(json.dumps(record) + "\n")
        handle.flush()
        self._offset = handle.tell()
        self._records[record["id"]] = ledger

    def ledgers(self):
        """The spent ledgers, in order (call under :meth:`locked`)."""
        return list(self._records.values())

    def append_spend(self, handle, ledger):
        """Record ``ledger`` (call under :meth:`locked`, after the check)."""
        ident = uuid.uuid4().hex
        self._append(handle, {"op": "spend", "id": ident, "ledger": _ledger_to_json(ledger)},
                     ledger)
        self._ids[ledger] = ident

    def amend(self, handle, planned, final):
        """Replace the spend of ``planned`` (made by this process) by ``final``."""
        ident = self._ids.get(planned)
        if ident is None:
            for candidate, ledger in self._records.items():
                if ledger is planned:
                    ident = candidate
                    break
        if ident is None:
            return False
        self._append(handle, {"op": "amend", "id": ident, "ledger": _ledger_to_json(final)},
                     final)
        self._ids.pop(planned, None)
        self._ids[final] = ident
        return True
