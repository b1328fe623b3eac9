"""What the classic consumer puts in its JoinGroup (no Ray: the subscription is built from
the actor's membership alone)."""
from actors.clients.consumer import DEFAULT_CONFIG
from actors.clients.consumer_actor import ConsumerActor
from runtime.group.consumer_protocol import decode_subscription


def test_an_eager_member_reports_its_previous_assignment_as_owned():
    """A departure from Kafka (README): Kafka's eager consumer reports no owned partitions
    once it revoked them; shoal's reports its last assignment, which its sticky assignor
    keeps stickiness from (it writes no user data)."""
    actor = ConsumerActor("ns", {"offsets.topic.num.partitions": 1}, "c", "g", dict(DEFAULT_CONFIG))
    member = actor.member
    assert not member.cooperative  # ("range", "cooperative-sticky"): eager
    member.subscription = ("t",)
    member.last_assignment = {"t": (0, 1), "gone": (3,)}
    member.generation = 4
    protocols = member.join_request().protocols
    assert [p.name for p in protocols] == ["range", "cooperative-sticky"]
    subscription = decode_subscription(protocols[0].metadata)
    assert (subscription.topics, subscription.owned_partitions, subscription.generation_id) == (
        ("t",), (("t", (0, 1)),), 4)
