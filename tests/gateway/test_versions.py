"""The gateway's version table: what it advertises is what kio can encode, and where it
departs from Kafka 4.2 (README, "where shoal differs from Kafka") it says so here."""
from runtime.wire.versions import check_table


def test_the_table_is_encodable():
    from actors.server.gateway.actor import VERSIONS
    assert check_table(VERSIONS) == VERSIONS


def test_join_group_starts_at_version_4():
    # shoal's coordinator always answers a first join with MEMBER_ID_REQUIRED (Kafka's rule
    # from JoinGroup v4); Kafka 4.2 serves JoinGroup from v2.
    from actors.server.gateway.actor import VERSIONS
    assert VERSIONS[11] == (4, 9)
