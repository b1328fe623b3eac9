"""The gateway's view of topic ids: Kafka's newer APIs name topics by id where shoal's
coordinators name them by topic name, so the gateway translates at its edge. The ids are the
controller's, the same ones Metadata gives clients; they are read again when an id or a name
is missing (a topic created or deleted since), one read at a time however many ask."""
from __future__ import annotations

import asyncio

from runtime.messages.topics import MetadataRequest

from .. import naming


class TopicIds:
    def __init__(self, call) -> None:
        self._call = call  # GatewayActor.call
        self._by_name: dict[str, str] = {}
        self._by_id: dict[str, str] = {}
        self._reading: asyncio.Task | None = None

    def learn(self, topics) -> None:
        """Take the ids of a controller Metadata answer (the gateway's Metadata reads one)."""
        for t in topics:
            if t.topic_id and not t.error_code:
                self._by_name[t.name] = t.topic_id
                self._by_id[t.topic_id] = t.name

    async def _refresh(self) -> None:
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(self._call(naming.CONTROLLER, "metadata", MetadataRequest(None)))
        response = await asyncio.shield(self._reading)
        self._by_name.clear()
        self._by_id.clear()
        self.learn(response.topics)

    async def names(self, topic_ids) -> dict[str, str]:
        """topic id -> name for the ids given; an id the controller does not know is left out."""
        if any(i not in self._by_id for i in topic_ids):
            await self._refresh()
        return {i: self._by_id[i] for i in topic_ids if i in self._by_id}

    async def ids(self, names) -> dict[str, str]:
        """topic name -> id for the names given; a name the controller does not know is left out."""
        if any(n not in self._by_name for n in names):
            await self._refresh()
        return {n: self._by_name[n] for n in names if n in self._by_name}
