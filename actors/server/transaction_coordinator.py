"""The transaction coordinator actor of one __transaction_state partition (Kafka's
TransactionCoordinator with its TransactionMarkerChannelManager).

The shard decides; this shell only moves markers. Once a PrepareCommit or PrepareAbort is
durable, a task writes the transaction's markers to every partition leader in it (the
group coordinator for the __consumer_offsets partition of AddOffsetsToTxn), retrying until
each one answers, and then completes the transaction through the shard. A restarted actor
finds the same Prepare states in its log and finishes them.
"""
from __future__ import annotations

import asyncio
import logging

import ray

from runtime.errors import Errors, KafkaError
from runtime.messages.topics import MetadataRequest
from runtime.messages.txn import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
                                  AddPartitionsToTxnResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
                                  EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse,
                                  ListTransactionsRequest, ListTransactionsResponse, WriteTxnMarkersRequest)
from runtime.topics.internal import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, log_name
from runtime.txn.coordinator import TransactionCoordinatorShard, TxnMarkers

from .. import naming
from ..errors import to_kafka_error
from ..retry import ActorDirectory, ActorNotFound, Backoff
from .shard_host import ShardHost, now_ms

log = logging.getLogger(__name__)

# Marker writes that cannot succeed by retrying: the leader refuses the marker itself.
_MARKER_GIVE_UP = frozenset({Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED,
                             Errors.UNKNOWN_TOPIC_OR_PARTITION})


class TransactionCoordinatorActor(ShardHost):
    def __init__(self, data_dir: str, partition: int, config: dict) -> None:
        # Kafka's transaction coordinator appends at once (no linger): its clients block on
        # every answer, and EndTxn waits for two appends.
        config = {**config, "append.linger.ms": config.get("transaction.state.log.append.linger.ms", 0)}
        super().__init__(log_name(TRANSACTION_STATE_TOPIC, partition), partition, TransactionCoordinatorShard, data_dir,
                         config, segment_bytes_key="transaction.state.log.segment.bytes")
        self._namespace = config.get(naming.NAMESPACE_KEY) or ray.get_runtime_context().namespace
        self._marker_timeout_s = int(config.get("request.timeout.ms", 30000)) / 1000
        self._sending: dict[str, asyncio.Task] = {}  # transactional id -> its marker task
        self._actors = ActorDirectory(self._namespace)

    # ------------------------------------------------------------------ Kafka's APIs

    async def init_producer_id(self, request: InitProducerIdRequest) -> InitProducerIdResponse:
        return await self._answer(request, lambda s, now: s.init_producer_id(request, now))

    async def add_partitions_to_txn(self, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
        return await self._answer(request, lambda s, now: s.add_partitions_to_txn(request, now))

    async def add_offsets_to_txn(self, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
        return await self._answer(request, lambda s, now: s.add_offsets_to_txn(request, now))

    async def end_txn(self, request: EndTxnRequest) -> EndTxnResponse:
        """Answers once the markers are written and the transaction is complete."""
        return await self._answer(request, lambda s, now: s.end_txn(request, now))

    async def describe_transactions(self, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
        return await self._answer(request, lambda s: s.describe_transactions(request), read=True)

    async def list_transactions(self, request: ListTransactionsRequest) -> ListTransactionsResponse:
        return await self._answer(request, lambda s: s.list_transactions(request, now_ms()), read=True)

    async def pending_markers(self) -> list[str]:
        """The transactional ids whose markers are being written (for tests and status)."""
        return sorted(self._sending)

    # ------------------------------------------------------------------ markers

    def _on_active(self) -> None:
        # Only durable Prepare states: a batch still pending may yet be reverted.
        if self.runtime.pending_records:
            return
        for markers in self.runtime.shard.pending_markers():
            if markers.transactional_id not in self._sending:
                self._sending[markers.transactional_id] = asyncio.get_running_loop().create_task(
                    self._complete(markers))

    async def _complete(self, markers: TxnMarkers) -> None:
        try:
            await asyncio.gather(*(self._write_markers(tp, request)
                                   for tp, request in markers.requests_by_partition().items()))
            # Released before the Complete record is appended, so that it does not wait for
            # that flush, and in the same step, so that no request sees the Prepare state after
            # its producer was told the transaction is over.
            self.runtime.write(lambda s, now: s.markers_written(markers.transactional_id), now_ms())
            await self._write(lambda s, now: s.complete_markers(markers.transactional_id, markers.producer_id,
                                                                markers.producer_epoch, now))
        except asyncio.CancelledError:
            raise
        except KafkaError as e:
            # The shard moved on or reverted; _on_active looks at the Prepare states again.
            log.warning("%s: completing %s: %s", self.runtime.name, markers.transactional_id, e)
        except Exception:
            log.exception("%s: completing %s failed", self.runtime.name, markers.transactional_id)
        finally:
            self._sending.pop(markers.transactional_id, None)
        self._kick()

    async def _write_markers(self, tp: tuple[str, int], request: WriteTxnMarkersRequest) -> None:
        """Write one partition's marker, retrying until its leader answers for it."""
        topic, partition = tp
        name = (naming.group_coordinator(partition) if topic == OFFSETS_TOPIC
                else naming.partition_host_of(topic, partition, self.runtime.config))
        backoff = Backoff(50, 1000)
        while True:
            try:
                response = await self._actors.send(name, "write_txn_markers", request,
                                                   timeout_s=self._marker_timeout_s)
                codes = [p.error_code for m in response.markers for t in m.topics for p in t.partitions]
                error = next((Errors.for_code(c) for c in codes if c), None)
            except ActorNotFound:
                error = Errors.NOT_LEADER_OR_FOLLOWER  # the coordinator is being (re)created
            except asyncio.CancelledError:
                raise
            except Exception as e:
                error = to_kafka_error(e).error if not isinstance(e, asyncio.TimeoutError) else Errors.REQUEST_TIMED_OUT
            if error is None:
                return
            if error is Errors.NOT_LEADER_OR_FOLLOWER and topic != OFFSETS_TOPIC and not await self._topic_exists(topic):
                log.warning("%s: %s was deleted: its marker is dropped", self.runtime.name, topic)
                return
            if error in _MARKER_GIVE_UP:
                log.error("%s: %s refused the marker %s: %s", self.runtime.name, name, request, error.name)
                return
            await asyncio.sleep(backoff.next_s())

    async def _topic_exists(self, topic: str) -> bool:
        try:
            response = await self._actors.send(naming.CONTROLLER, "metadata", MetadataRequest((topic,)), timeout_s=None)
        except Exception as e:
            log.info("%s: metadata of %s: %s", self.runtime.name, topic, to_kafka_error(e))
            return True  # not known to be gone: keep trying
        return all(t.error_code != Errors.UNKNOWN_TOPIC_OR_PARTITION.code for t in response.topics)

