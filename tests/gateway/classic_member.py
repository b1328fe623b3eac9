"""A Kafka client consumer in its own process, for tests that kill one with SIGKILL:
`python -m tests.gateway.classic_member CLIENT BOOTSTRAP GROUP TOPIC STRATEGY OUT`.

CLIENT is kafka-python or confluent. It subscribes, polls until killed, and after every
poll writes its assigned partitions to OUT as JSON (through a rename, so a reader never
sees half a file).
"""
import json
import os
import sys

from tests.gateway.classic_clients import member


def main(client: str, bootstrap: str, group: str, topic: str, strategy: str, out: str) -> None:
    consumer = member(client, bootstrap, group, topic, strategy)
    while True:
        consumer.poll()
        with open(out + ".tmp", "w") as f:
            json.dump(sorted(consumer.assignment()), f)
        os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main(*sys.argv[1:])
