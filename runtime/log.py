"""The segmented, append-only log that holds every coordinator's state and every topic
partition's data: its single writer (FileLog). What the folder holds on disk is described
in `runtime.logformat`; readers in other processes use `runtime.log_read`, flushes that run
off the writer's thread `runtime.log_sync`, and compactions `runtime.log_compaction`.

The writer tracks two positions: ``end_offset`` (the next offset it will assign) and
``durable_offset`` (everything below it is flushed by the flush policy).

The log fails closed, as Kafka's does: it trusts nothing it has not verified or written.
* Opening takes the folder's ``.lock`` (one writer per folder; a second gets
  LogLockedError; readers never take it), checks every segment the manifest names against
  the disk (present; a closed one of the size and first offset the manifest says), cuts a
  torn tail of the active segment (damage with nothing valid after it: a crash
  mid-write), and refuses any other damage with CorruptRecordError naming the file, the
  byte and the offset, rather than cut away batches that were acknowledged.
* An I/O error that leaves memory and disk in doubt (a failed fsync, roll or manifest
  update, or a failed write that cannot be cut back) takes the log *offline*: it accepts
  nothing until ``reopen()`` has read and checked the folder again. Going offline drops
  everything past the durable offset, from the file too, so every append not yet flushed
  fails. While that cut has not been made (``unsettled``: the disk refused it as well),
  the owner must not answer those appends with an error: a reopen that found them whole
  would otherwise serve a write its client was told had failed. ``reopen()`` makes the cut
  before anything else.
"""
from __future__ import annotations

import bisect
import dataclasses
import errno
import os
from dataclasses import dataclass

from .errors import CorruptRecordError
from .logformat import (ATTR_COMPACTED, ATTR_CONTROL, ATTR_TRANSACTIONAL, BATCH_HEADER, COMPACTED_RE,
                        COMPACTION_LOCK, HEADER_SIZE, MANIFEST, MANIFEST_LOCK, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
                        NO_SEQUENCE, OS_IO, SEGMENT_RE, WRITER_LOCK, Batch, FileLock, Manifest, OsIO, SegmentInfo,
                        check_segment_batches, compacted_file_name, encode_batch, read_manifest, rebuild_manifest,
                        scan_batches, segment_file_name, update_manifest, valid_batch_after, write_manifest)
from .log_sync import SyncPoint

__all__ = ["ATTR_COMPACTED", "ATTR_CONTROL", "ATTR_TRANSACTIONAL", "BATCH_HEADER", "HEADER_SIZE", "MANIFEST",
           "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "NO_SEQUENCE", "Batch", "FileLog", "LogConfig", "LogLockedError",
           "LogWriteError", "Manifest", "OsIO", "SegmentInfo", "compacted_file_name", "encode_batch", "read_manifest",
           "rebuild_manifest", "scan_batches", "segment_file_name", "update_manifest"]


class LogWriteError(OSError):
    """The log could not append or flush. Nothing past ``durable_offset`` may be trusted."""


class LogLockedError(OSError):
    """Another writer holds the folder's lock."""


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 100 * 1024 * 1024  # Kafka's offsets.topic.segment.bytes
    fsync: bool = True  # fsync every flush; off leaves durability to the page cache

    @classmethod
    def from_config(cls, config: dict | None, prefix: str = "") -> "LogConfig":
        config = config or {}
        return cls(int(config.get(prefix + "segment.bytes", cls.segment_bytes)),
                   _as_bool(config.get("log.flush.fsync", cls.fsync)))


def _as_bool(v) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


def _take_writer_lock(directory: str) -> FileLock:
    try:
        return FileLock(os.path.join(directory, WRITER_LOCK), blocking=False).acquire()
    except BlockingIOError:
        raise LogLockedError(errno.EAGAIN, f"failed to acquire the lock on {os.path.join(directory, WRITER_LOCK)}: "
                                           f"another writer is using the log folder {directory}") from None


class FileLog:
    """The single writer of one log folder."""

    def __init__(self, directory: str, config: LogConfig | None = None, *, io: OsIO | None = None,
                 name: str | None = None) -> None:
        self.directory = directory
        self.config = config or LogConfig()
        self.name = name or os.path.basename(os.path.normpath(directory))
        self._io = io or OS_IO
        self._fd = -1
        # The active segment's descriptor was closed while the log was idle (`park`): the
        # next append opens it again; reads open the file as they do closed segments'.
        self._parked = False
        self._lock: FileLock | None = None
        self._offline: str | None = None
        self._opened = 0  # how many times the folder was opened: which opening a SyncPoint is of
        self._cut_pending = False
        self.recovered: list[str] = []  # what open had to repair, for the operator's log
        os.makedirs(directory, exist_ok=True)
        self._open(None)

    # ------------------------------------------------------------------ opening

    def _open(self, cut_to: int | None) -> None:
        """Open and check the folder; ``cut_to`` is a durable offset past which an offline
        writer could not cut the active segment."""
        # (base_offset, position, size) of every batch in the active segment: reads find
        # their batches by bisection, going offline finds the durable end's byte position.
        self._active_index: list[tuple[int, int, int]] = []
        self._active_size = 0
        self._index: dict[str, list[tuple[int, int, int]]] = {}
        self._lock = _take_writer_lock(self.directory)
        self._parked = False
        self._opened += 1
        try:
            with FileLock(os.path.join(self.directory, MANIFEST_LOCK)):
                manifest, from_disk = self._manifest_to_open()
                self._check_closed_segments(manifest)
                self._remove_strays(manifest)
                active = manifest.segments[-1]
                path = os.path.join(self.directory, active.file)
                try:
                    self._fd = self._io.open(path, os.O_RDWR | os.O_APPEND | (0 if from_disk else os.O_CREAT))
                except FileNotFoundError:
                    raise CorruptRecordError(f"active segment {active.file} is in the manifest but not on disk",
                                             log=self.name, offset=active.base_offset) from None
                with open(path, "rb") as f:
                    data = f.read()
                end = self._index_active_segment(active, data)
                if cut_to is not None:
                    end = self._cut_to_durable(active, cut_to, end)
                active.size = self._active_size
                write_manifest(self.directory, manifest, self._io)
        except BaseException:
            self.close()
            raise
        self.manifest = manifest
        self.end_offset = self.durable_offset = end

    def _manifest_to_open(self) -> tuple[Manifest, bool]:
        """The manifest, and whether it was read from disk (then every file it names must exist)."""
        try:
            manifest = read_manifest(self.directory)
            problem = "manifest missing"
        except (ValueError, KeyError, TypeError) as e:
            manifest = None
            problem = f"manifest unreadable ({e})"
        if manifest is not None and manifest.segments:
            return manifest, True
        if manifest is None and any(SEGMENT_RE.match(n) or COMPACTED_RE.match(n) for n in os.listdir(self.directory)):
            self.recovered.append(f"{problem}: rebuilt from the segment files")
            manifest = rebuild_manifest(self.directory)
        manifest = manifest or Manifest()
        if not manifest.segments:
            manifest.segments.append(SegmentInfo(segment_file_name(0), 0))
        return manifest, False

    def _check_closed_segments(self, manifest: Manifest) -> None:
        """Every closed segment is there, of the size the manifest gives, starting where it
        says, and the segments follow each other without a hole. (Their batches are checked
        one by one, CRC and offsets, when they are first read.)"""
        segments = manifest.segments
        for seg, nxt in zip(segments, segments[1:]):
            path = os.path.join(self.directory, seg.file)
            if seg.end_offset != nxt.base_offset:
                raise CorruptRecordError(f"segment {seg.file} ends at {seg.end_offset} but the next one, "
                                         f"{nxt.file}, starts at {nxt.base_offset}", log=self.name,
                                         offset=seg.end_offset)
            try:
                size = os.path.getsize(path)
            except FileNotFoundError:
                raise CorruptRecordError(f"segment {seg.file} is in the manifest but not on disk",
                                         log=self.name, offset=seg.base_offset) from None
            if size != seg.size:
                raise CorruptRecordError(f"segment {seg.file} has {size} bytes but the manifest says {seg.size}",
                                         log=self.name, offset=seg.base_offset)
            if size:
                with open(path, "rb") as f:
                    header = f.read(HEADER_SIZE)
                first = BATCH_HEADER.unpack(header)[2] if len(header) == HEADER_SIZE else None
                compacted = COMPACTED_RE.match(seg.file) is not None
                if first is None or not (seg.base_offset <= first < seg.end_offset if compacted
                                         else first == seg.base_offset):
                    raise CorruptRecordError(f"segment {seg.file} starts at offset {first} but the manifest says "
                                             f"{seg.base_offset}", log=self.name, offset=seg.base_offset)

    def _index_active_segment(self, active: SegmentInfo, data: bytes) -> int:
        """Index the whole batches of the active segment, cutting a torn tail; returns the
        end offset."""
        batches, good = scan_batches(data, strict=False, name=active.file)
        pos = 0
        expected = active.base_offset
        for b in batches:
            # Whole batches with the wrong offsets are not a torn write but a folder
            # whose files and manifest disagree: refuse rather than guess.
            if b.base_offset != expected:
                raise CorruptRecordError(f"batch at byte {pos} of segment {active.file} starts at offset "
                                         f"{b.base_offset}, expected {expected}", log=self.name, offset=expected)
            expected = b.next_offset
            self._active_index.append((b.base_offset, pos, b.size))
            pos += b.size
            active.max_timestamp = max(active.max_timestamp, b.timestamp)
        if good < len(data):
            after = valid_batch_after(data, good, expected)
            if after is not None:
                raise CorruptRecordError(
                    f"corrupt batch at byte {good} of segment {active.file}, followed by a valid batch at byte "
                    f"{after}: this is damage, not a torn tail, and cutting it would lose acknowledged batches "
                    f"(`shoal log verify` describes it)", log=self.name, offset=expected)
            self.recovered.append(
                f"{active.file}: cut a torn tail of {len(data) - good} bytes at byte {good} (offset {expected})")
            self._io.truncate(self._fd, good)
            self._io.fsync(self._fd)
        self._active_size = good
        return expected

    def _cut_to_durable(self, active: SegmentInfo, cut_to: int, end: int) -> int:
        if cut_to > end:
            raise CorruptRecordError(f"the log ends at {end}, before its durable offset {cut_to}",
                                     log=self.name, offset=end)
        if cut_to == end:
            return end
        i = bisect.bisect_left(self._active_index, (cut_to,))
        if i == len(self._active_index) or self._active_index[i][0] != cut_to:
            raise CorruptRecordError(f"durable offset {cut_to} does not start a batch of {active.file}",
                                     log=self.name, offset=cut_to)
        pos = self._active_index[i][1]
        self._io.truncate(self._fd, pos)
        self._io.fsync(self._fd)
        del self._active_index[i:]
        self.recovered.append(f"{active.file}: cut {self._active_size - pos} bytes past the durable offset "
                              f"{cut_to}, written before the log went offline")
        self._active_size = pos
        return cut_to

    def _remove_strays(self, manifest: Manifest) -> None:
        """Delete segment files the manifest no longer lists (left by a swap that crashed
        before its cleanup, or by a roll whose manifest update failed) and temporary files,
        unless a compaction is running now."""
        try:
            with FileLock(os.path.join(self.directory, COMPACTION_LOCK), blocking=False):
                live = {s.file for s in manifest.segments}
                for name in os.listdir(self.directory):
                    stray = (SEGMENT_RE.match(name) or COMPACTED_RE.match(name)) and name not in live
                    if stray or name.endswith(".tmp"):
                        self._io.unlink(os.path.join(self.directory, name))
        except BlockingIOError:
            pass

    def reopen(self) -> None:
        """Read and check the folder again, as a new writer would, after making the cut that
        going offline could not make. On failure the log stays offline."""
        cut_to = self.durable_offset if self._cut_pending else None
        self.close()
        self.recovered = []
        try:
            self._open(cut_to)
        except BaseException as e:
            self._offline = self._offline or f"reopen failed: {e}"
            raise
        self._offline = None
        self._cut_pending = False

    # ------------------------------------------------------------------ writing

    @property
    def active_segment(self) -> SegmentInfo:
        return self.manifest.segments[-1]

    @property
    def offline(self) -> str | None:
        """Why the log accepts nothing until it is reopened, or None."""
        return self._offline

    @property
    def closed(self) -> bool:
        return self._fd < 0 and not self._parked

    @property
    def parked(self) -> bool:
        return self._parked

    def park(self) -> bool:
        """Close the active segment's descriptor while the log is idle, so that thousands
        of idle logs do not hold thousands of descriptors; whether it did. Only a log with
        nothing waiting for a flush parks: the fsync that makes an append durable runs on
        the descriptor that wrote it."""
        if self._fd < 0 or self._offline or self.durable_offset != self.end_offset:  # closed, or parked already
            return False
        os.close(self._fd)
        self._fd = -1
        self._parked = True
        return True

    def _writer_fd(self) -> int:
        """The active segment's descriptor, opened again if the log parked it. A failure
        (out of descriptors) is an error for this write only: nothing was written, nothing
        is in doubt, and the log stays online."""
        if self._parked:
            try:
                self._fd = self._io.open(os.path.join(self.directory, self.active_segment.file),
                                         os.O_RDWR | os.O_APPEND)
            except OSError as e:
                raise LogWriteError(e.errno or errno.EIO,
                                    f"cannot open the active segment of {self.name} again: {e}") from e
            self._parked = False
        return self._fd

    @property
    def unsettled(self) -> bool:
        """The log went offline and could not yet cut what was not durable off its file."""
        return self._cut_pending

    @property
    def log_start_offset(self) -> int:
        return self.manifest.log_start_offset

    def raise_if_offline(self) -> None:
        if self._offline:
            raise LogWriteError(errno.EIO, f"log {self.name} is offline until it is reopened: {self._offline}")
        if self.closed:
            raise LogWriteError(errno.EBADF, f"log {self.name} is closed")

    def append(self, payload: bytes, count: int, timestamp: int, *, attributes: int = 0,
               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
               base_sequence: int = NO_SEQUENCE) -> int:
        """Write one batch (not yet flushed) and return its base offset. On failure the
        partial bytes are cut off and the log is as before, or, if they cannot be, the log
        goes offline."""
        self.raise_if_offline()
        if count <= 0:
            raise ValueError("a batch holds at least one record")
        base = self.end_offset
        data = encode_batch(base, payload, count, timestamp, attributes, producer_id, producer_epoch, base_sequence)
        if self._active_size > 0 and self._active_size + len(data) > self.config.segment_bytes:
            self.roll()
        fd = self._writer_fd()
        pos = self._active_size
        try:
            written = 0
            while written < len(data):
                written += self._io.write(fd, data[written:])
        except OSError as e:
            try:
                self._io.truncate(self._fd, pos)
            except OSError as cut:
                self._go_offline(f"could not cut a failed append back to byte {pos}: {cut} (after {e})")
            raise LogWriteError(e.errno or errno.EIO, f"append to {self.name} failed: {e}") from e
        self._active_index.append((base, pos, len(data)))
        self._active_size += len(data)
        seg = self.active_segment
        seg.size = self._active_size
        seg.max_timestamp = max(seg.max_timestamp, timestamp)
        self.end_offset = base + count
        return base

    def flush(self) -> None:
        """Make everything appended durable (fsync, per the flush policy). A failure takes
        the log offline and fails every append since the last flush."""
        self.raise_if_offline()
        if self.durable_offset == self.end_offset:
            return
        if self.config.fsync:
            try:
                self._io.fsync(self._fd)
            except OSError as e:
                # After a failed fsync the page cache cannot be trusted (the kernel may
                # have dropped the pages): nothing past the durable offset is kept.
                self._go_offline(f"flush failed: {e}")
                raise LogWriteError(e.errno or errno.EIO, f"flush of {self.name} failed: {e}") from e
        self.durable_offset = self.end_offset

    def sync_point(self) -> "SyncPoint | None":
        """A flush made on another thread, in three steps: this, then ``SyncPoint.sync()``
        anywhere, then ``synced()`` back on the writer's thread, which meanwhile may go on
        appending. None when there is nothing to make durable, or when the flush policy has
        no fsync (everything is durable now)."""
        self.raise_if_offline()
        if self.durable_offset == self.end_offset:
            return None
        if not self.config.fsync:
            self.durable_offset = self.end_offset
            return None
        try:
            # A descriptor of its own: a roll may close the writer's before the fsync runs.
            fd = os.dup(self._fd)
        except OSError:
            self.flush()  # out of descriptors: flush on this thread rather than not at all
            return None
        return SyncPoint(self._io, fd, self.end_offset, self._opened)

    def synced(self, point: "SyncPoint") -> None:
        """The sync point's fsync is over: everything below its offset is durable, or, if it
        failed, the log goes offline (as a failed ``flush``) and this raises LogWriteError.
        A log that went offline or was reopened since learns nothing from it."""
        if point.opened != self._opened or self._offline:
            return
        if point.error is not None:
            self._go_offline(f"flush failed: {point.error}")
            raise LogWriteError(point.error.errno or errno.EIO, f"flush of {self.name} failed: {point.error}")
        self.durable_offset = max(self.durable_offset, point.offset)

    def _go_offline(self, reason: str) -> None:
        """Refuse everything until reopened; forget, and try to cut off the file, every
        byte past the durable offset."""
        self._offline = reason
        i = bisect.bisect_left(self._active_index, (self.durable_offset,))
        pos = self._active_index[i][1] if i < len(self._active_index) else self._active_size
        del self._active_index[i:]
        self._active_size = pos
        self.end_offset = self.durable_offset
        if self._parked:
            return  # a parked log has nothing past its durable offset
        try:
            if os.fstat(self._fd).st_size != pos:
                self._cut_pending = True
                self._io.truncate(self._fd, pos)
                self._io.fsync(self._fd)
            self._cut_pending = False
        except OSError:
            self._cut_pending = True

    def roll(self) -> None:
        """Close the active segment and start a new one at ``end_offset``. Any failure
        takes the log offline: the manifest on disk may or may not have changed."""
        self.raise_if_offline()
        self.flush()
        self._writer_fd()
        fd = -1
        try:
            if not self.config.fsync:
                # A closed segment is never written again: make it whole on disk whatever the policy.
                self._io.fsync(self._fd)
            new = SegmentInfo(segment_file_name(self.end_offset), self.end_offset)
            fd = self._io.open(os.path.join(self.directory, new.file), os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
            closed = dataclasses.replace(self.active_segment, end_offset=self.end_offset)

            def add(m: Manifest) -> None:
                m.segments[-1] = closed
                m.segments.append(new)

            manifest = update_manifest(self.directory, add, self._io)
        except Exception as e:
            if fd >= 0:
                os.close(fd)
            self._go_offline(f"roll failed: {e}")
            raise LogWriteError(getattr(e, "errno", None) or errno.EIO, f"roll of {self.name} failed: {e}") from e
        os.close(self._fd)
        self._fd = fd
        self.manifest = manifest
        self._active_index = []
        self._active_size = 0

    def _update_manifest(self, change, what: str) -> None:
        """`change` made to the manifest on disk (read, changed and written under its lock);
        the writer keeps its own record of its active segment. A failure takes the log
        offline (LogWriteError)."""
        active = self.active_segment
        try:
            manifest = update_manifest(self.directory, change, self._io)
        except OSError as e:
            self._go_offline(f"manifest update of {what} failed: {e}")
            raise LogWriteError(e.errno or errno.EIO, f"{what} of {self.name} failed: {e}") from e
        self.manifest = manifest
        self.manifest.segments[-1] = active

    def advance_log_start_offset(self, offset: int) -> None:
        """DeleteRecords: the log starts at `offset` from now on (it never moves back),
        durably when this returns; the closed segments wholly before it are deleted."""
        self.raise_if_offline()

        def move(m: Manifest) -> None:
            m.log_start_offset = max(m.log_start_offset, offset)

        self._update_manifest(move, "moving the log start")
        doomed = []
        for s in self.manifest.segments[:-1]:
            if s.end_offset is None or s.end_offset > offset:
                break
            doomed.append(s.file)
        if doomed:
            self.delete_segments(doomed)

    def delete_segments(self, files: list[str]) -> None:
        """Retention: delete closed segments at the head of the log; the log start offset
        moves to the first remaining segment."""
        self.raise_if_offline()

        def drop(m: Manifest) -> None:
            # Checked against the manifest on disk: a compaction may have swapped segments.
            head = m.segments[:len(files)]
            if [s.file for s in head] != list(files) or any(s.end_offset is None for s in head):
                raise ValueError("only closed segments at the head of the log can be deleted")
            del m.segments[:len(files)]
            m.log_start_offset = max(m.log_start_offset, m.segments[0].base_offset)

        self._update_manifest(drop, "retention")
        for f in files:
            self._index.pop(f, None)
            try:
                self._io.unlink(os.path.join(self.directory, f))
            except OSError:
                pass  # no longer listed: the next open removes it

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._parked = False
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # ------------------------------------------------------------------ reading

    def read(self, from_offset: int = 0, upto: int | None = None, max_bytes: int | None = None,
             max_offsets: int | None = None, min_one: bool = True) -> list[Batch]:
        """Batches holding offsets in [from_offset, upto) (``upto`` defaults to the durable
        offset). The first batch is returned whole even if it starts before from_offset.
        Stops before max_bytes of payload is passed, and once the batches cover max_offsets
        offsets from from_offset, but returns at least one batch unless `min_one` is false
        (Kafka's minOneMessage). The limits are checked on the index, before reading, so that
        bytes the caller will not use are neither read nor checked."""
        upto = self.durable_offset if upto is None else upto
        for attempt in range(2):
            try:
                return self._read_indexed(from_offset, upto, max_bytes, max_offsets, min_one)
            except FileNotFoundError:
                if attempt:
                    raise
                # A compaction swapped closed segments: take its manifest and go on.
                fresh = read_manifest(self.directory)
                if fresh is not None:
                    self.manifest.segments[:-1] = fresh.segments[:-1]
                    self.manifest.log_start_offset = fresh.log_start_offset
                self._index.clear()
        return []

    def _segment_index(self, i: int) -> list[tuple[int, int, int]]:
        """(base_offset, position, size) of each batch in segment i."""
        seg = self.manifest.segments[i]
        if i == len(self.manifest.segments) - 1:
            return self._active_index
        cached = self._index.get(seg.file)
        if cached is None:
            with open(os.path.join(self.directory, seg.file), "rb") as f:
                batches, _ = scan_batches(f.read(), strict=True, name=seg.file, base_offset=seg.base_offset)
            check_segment_batches(batches, seg, self.name)
            pos = 0
            cached = []
            for b in batches:
                cached.append((b.base_offset, pos, b.size))
                pos += b.size
            self._index[seg.file] = cached
        return cached

    def _read_indexed(self, from_offset: int, upto: int, max_bytes: int | None,
                      max_offsets: int | None, min_one: bool) -> list[Batch]:
        segments = self.manifest.segments
        bases = [s.base_offset for s in segments]
        i = max(bisect.bisect_right(bases, from_offset) - 1, 0)
        out: list[Batch] = []
        budget = max_bytes
        enough_at = upto if max_offsets is None else from_offset + max(max_offsets, 1)
        while i < len(segments) and segments[i].base_offset < upto:
            idx = self._segment_index(i)
            j = max(bisect.bisect_right(idx, (from_offset, 1 << 62, 0)) - 1, 0)
            k = j
            while k < len(idx) and idx[k][0] < upto:
                size = idx[k][2] - HEADER_SIZE
                if (out or k > j or not min_one) and (idx[k][0] >= enough_at
                                                      or (budget is not None and size > budget)):
                    break
                if budget is not None:
                    budget -= size
                k += 1
            if k > j:
                start, stop = idx[j][1], idx[k - 1][1] + idx[k - 1][2]
                fd = self._fd if i == len(segments) - 1 and not self._parked else None
                if fd is not None:
                    data = os.pread(fd, stop - start, start)
                else:
                    with open(os.path.join(self.directory, segments[i].file), "rb") as f:
                        f.seek(start)
                        data = f.read(stop - start)
                batches, _ = scan_batches(data, strict=True, name=segments[i].file, base_offset=idx[j][0])
                out.extend(b for b in batches if b.last_offset >= from_offset)
            if k < len(idx):  # stopped by upto, the offset limit or the byte budget
                break
            i += 1
        return out
