"""What a wait event means, in one plain line: the run report's wait-event tables say it
beside each row, so that a reader need not look the name up.

Written for pgdyno, from what the server is doing while a session shows the event. An
event not listed here is explained by its class (``wait_event_type``).
"""

from __future__ import annotations

from pgdyno.analysis.telemetry.model import CPU_EVENT

CLASS_MEANINGS: dict[str, str] = {
    CPU_EVENT: "running: active with no wait event, so on a CPU or waiting for one",
    "IO": "waiting for the kernel to finish a read, write or flush",
    "LWLock": "queued for a short internal lock that guards shared memory",
    "Lock": "blocked by another transaction's row, table or transaction lock",
    "BufferPin": "waiting for other sessions to let go of a page it must change",
    "Client": "waiting for the client program: the next query or room to send results",
    "IPC": "waiting for another server process to do its part",
    "Timeout": "sleeping on purpose until a set delay has passed",
    "Activity": "a background process idle, waiting for work",
    "Extension": "waiting inside an extension's code",
    "InjectionPoint": "stopped at a test hook (injection point)",
}
"""Meaning of each wait class, for an event without one of its own."""

EVENT_MEANINGS: dict[tuple[str, str], str] = {
    (CPU_EVENT, CPU_EVENT): CLASS_MEANINGS[CPU_EVENT],
    # LWLock
    ("LWLock", "WALWrite"): "waiting its turn to write WAL buffers out to the WAL file",
    ("LWLock", "WALInsert"): "waiting for a slot to copy its WAL record into WAL buffers",
    ("LWLock", "BufferMapping"): "looking up or loading a page in shared buffers while "
                                 "others change the same part of the buffer table",
    ("LWLock", "BufferContent"): "waiting to read or change a page another session holds",
    ("LWLock", "LockManager"): "contention on the table of heavyweight locks (many "
                               "sessions locking the same objects)",
    ("LWLock", "ProcArray"): "taking or ending a snapshot while many transactions start "
                             "and commit",
    ("LWLock", "XactSLRU"): "reading or writing commit status pages (pg_xact)",
    ("LWLock", "XactBuffer"): "reading or writing commit status pages (pg_xact)",
    ("LWLock", "SubtransSLRU"): "looking up subtransactions: many savepoints or a long "
                                "transaction",
    ("LWLock", "WALBufMapping"): "waiting for a WAL buffer to be freed for new WAL",
    ("LWLock", "CheckpointerComm"): "handing a flush request to the checkpointer",
    ("LWLock", "MultiXactOffsetSLRU"): "reading shared row locks (multixacts)",
    ("LWLock", "MultiXactMemberSLRU"): "reading shared row locks (multixacts)",
    # IO
    ("IO", "DataFileRead"): "reading a table or index page the cache did not hold",
    ("IO", "DataFileWrite"): "writing a dirty page out itself to make room in shared buffers",
    ("IO", "DataFileExtend"): "growing a table or index file by new pages",
    ("IO", "DataFileFlush"): "making written table or index pages durable",
    ("IO", "DataFileSync"): "making written table or index pages durable",
    ("IO", "DataFilePrefetch"): "asking the kernel to read pages ahead",
    ("IO", "DataFileImmediateSync"): "syncing a file at once (e.g. a new index)",
    ("IO", "WALSync"): "waiting for WAL to reach the disk at commit (fsync/fdatasync)",
    ("IO", "WALWrite"): "writing WAL from buffers to the WAL file",
    ("IO", "WALRead"): "reading WAL back from its files",
    ("IO", "WALInitWrite"): "filling a new WAL segment file before use",
    ("IO", "WALInitSync"): "syncing a new WAL segment file before use",
    ("IO", "BufFileRead"): "reading a temporary file (a sort or hash that spilled)",
    ("IO", "BufFileWrite"): "writing a temporary file (a sort or hash that spilled)",
    ("IO", "SLRURead"): "reading a commit status or similar small cache page from disk",
    ("IO", "SLRUWrite"): "writing a commit status or similar small cache page to disk",
    ("IO", "CopyFileRead"): "copying a file (e.g. CREATE DATABASE)",
    ("IO", "CopyFileWrite"): "copying a file (e.g. CREATE DATABASE)",
    ("IO", "RelationMapRead"): "reading the map of system catalogue files",
    ("IO", "ControlFileSyncUpdate"): "syncing pg_control after a checkpoint or WAL switch",
    ("IO", "AioIoCompletion"): "waiting for an asynchronous read to complete (PG18 AIO)",
    ("IO", "AioIoUringExecution"): "waiting for io_uring to carry out a read (PG18 AIO)",
    # Lock
    ("Lock", "transactionid"): "waiting for another transaction that changed the same row "
                               "to commit or roll back",
    ("Lock", "tuple"): "queued behind other sessions to lock the same row",
    ("Lock", "relation"): "waiting for a lock on a whole table or index (DDL, LOCK, "
                          "VACUUM FULL)",
    ("Lock", "extend"): "waiting for another session that is growing the same table",
    ("Lock", "virtualxid"): "waiting for a transaction to end (e.g. CREATE INDEX "
                            "CONCURRENTLY)",
    ("Lock", "advisory"): "waiting for an advisory lock the application took",
    ("Lock", "page"): "waiting for a lock on one index page",
    # Client
    ("Client", "ClientRead"): "waiting for the client's next command: client-side think "
                              "or network time, not server work",
    ("Client", "ClientWrite"): "waiting for the network to take results it sends",
    ("Client", "WalSenderWaitForWAL"): "a WAL sender waiting for new WAL to ship",
    # IPC
    ("IPC", "SyncRep"): "waiting for a synchronous standby to confirm the commit",
    ("IPC", "BgWorkerStartup"): "waiting for a background worker to start",
    ("IPC", "ExecuteGather"): "a parallel query's leader waiting for its workers",
    ("IPC", "ParallelFinish"): "a parallel query waiting for its workers to finish",
    ("IPC", "BufferIO"): "waiting for another session's read or write of the same page",
    ("IPC", "CheckpointStart"): "waiting for a checkpoint to begin",
    ("IPC", "CheckpointDone"): "waiting for a requested checkpoint to finish",
    ("IPC", "ProcArrayGroupUpdate"): "waiting for a group leader to end its transaction "
                                     "with it",
    ("IPC", "XactGroupUpdate"): "waiting for a group leader to record its commit status",
    ("IPC", "MessageQueueReceive"): "waiting for a parallel worker to send rows",
    ("IPC", "MessageQueueSend"): "waiting for room to send rows to the leader",
    # Timeout
    ("Timeout", "PgSleep"): "in pg_sleep(), as the workload asked",
    ("Timeout", "VacuumDelay"): "vacuum pausing to keep its I/O within its cost limit",
    ("Timeout", "SpinDelay"): "backing off after a busy spinlock",
    ("Timeout", "CommitDelay"): "pausing before the WAL flush so more commits share it "
                                "(commit_delay)",
    ("Timeout", "RecoveryApplyDelay"): "a standby holding WAL back (recovery_min_apply_delay)",
    # Activity (background processes)
    ("Activity", "WalWriterMain"): "the WAL writer idle between rounds",
    ("Activity", "CheckpointerMain"): "the checkpointer idle until the next checkpoint",
    ("Activity", "BgWriterMain"): "the background writer idle between rounds",
    ("Activity", "BgWriterHibernate"): "the background writer asleep: nothing to clean",
    ("Activity", "AutovacuumMain"): "the autovacuum launcher idle between rounds",
    ("Activity", "IoWorkerMain"): "an I/O worker idle, waiting for a request (PG18)",
    ("Activity", "ArchiverMain"): "the WAL archiver idle, waiting for a finished segment",
}
"""Meaning of common events, by (wait class, event)."""


def wait_meaning(wait_class: str, event: str | None = None) -> str:
    """One line on what a session in this wait is doing: the event's own meaning, else its
    class's, else a plain fallback that names the class."""
    if event is not None and (wait_class, event) in EVENT_MEANINGS:
        return EVENT_MEANINGS[(wait_class, event)]
    if wait_class in CLASS_MEANINGS:
        return CLASS_MEANINGS[wait_class]
    return f"a wait of class {wait_class} (not described by pgdyno)"
