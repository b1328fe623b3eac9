"""The gateway's view of the topics (Kafka's MetadataCache, for what the gateway needs of it).

Kafka's newer APIs name topics by id where shoal's coordinators name them by topic name, so
the gateway translates at its edge. The ids are the controller's, the same ones Metadata
gives clients; they are read again when an id or a name is missing (a topic created or
deleted since), one read at a time however many ask.

It also keeps the topics of the controller's last answers, so that Metadata is answered
while the controller restarts, as a Kafka broker answers from its cache whatever its
controller is doing: an answer without brokers makes a client drop its connections (and
librdkafka its share sessions)."""
from __future__ import annotations

import asyncio

from runtime.errors import Errors, KafkaError
from runtime.messages.topics import MetadataRequest, MetadataResponse, MetadataResponseTopic

from .. import naming


class TopicIds:
    def __init__(self, call) -> None:
        self._call = call  # GatewayActor.call
        self._by_name: dict[str, str] = {}
        self._by_id: dict[str, str] = {}
        self._topics: dict[str, MetadataResponseTopic] = {}
        self._reading: asyncio.Task | None = None

    def learn(self, topics) -> None:
        """Take the topics of a controller Metadata answer (the gateway's Metadata reads one)."""
        for t in topics:
            if t.topic_id and not t.error_code:
                self._by_name[t.name] = t.topic_id
                self._by_id[t.topic_id] = t.name
                self._topics[t.name] = t
            elif t.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.code:
                self._topics.pop(t.name, None)

    def cached(self, names: tuple[str, ...] | None, error: KafkaError) -> MetadataResponse:
        """The controller's last word on these topics (None: all it named), for when it cannot
        be asked; a topic it never named carries `error`, why it could not be."""
        if names is None:
            return MetadataResponse(tuple(self._topics.values()))
        return MetadataResponse(tuple(self._topics.get(n) or MetadataResponseTopic(n, None, error.code)
                                      for n in names))

    async def _refresh(self) -> None:
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(self._call(naming.CONTROLLER, "metadata", MetadataRequest(None)))
        response = await asyncio.shield(self._reading)
        self._by_name.clear()
        self._by_id.clear()
        self._topics.clear()
        self.learn(response.topics)

    async def names(self, topic_ids) -> dict[str, str]:
        """topic id -> name for the ids given; an id the controller does not know is left out."""
        if any(i not in self._by_id for i in topic_ids):
            await self._refresh()
        return self.known_names(topic_ids)

    def forget(self, topic_id: str) -> None:
        """The controller has no topic of this id (deleted since): the next ask reads again."""
        name = self._by_id.pop(topic_id, None)
        if name is not None and self._by_name.get(name) == topic_id:
            del self._by_name[name]
            self._topics.pop(name, None)

    def known_names(self, topic_ids) -> dict[str, str]:
        """`names` as far as the cache knows, without asking the controller."""
        return {i: self._by_id[i] for i in topic_ids if i in self._by_id}

    async def ids(self, names) -> dict[str, str]:
        """topic name -> id for the names given; a name the controller does not know is left out."""
        if any(n not in self._by_name for n in names):
            await self._refresh()
        return {n: self._by_name[n] for n in names if n in self._by_name}

    async def missing(self, names) -> set[str]:
        """The names the controller has no topic of (an offset commit names them at its risk:
        Kafka answers UNKNOWN_TOPIC_OR_PARTITION for them). None while the controller cannot
        be asked: a commit does not wait on it."""
        names = set(names)
        try:
            return names - set(await self.ids(sorted(names)))
        except KafkaError:
            return set()
