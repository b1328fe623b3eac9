"""Java-compatible hashing: coordinator routing and Kafka's default producer partitioner."""
from __future__ import annotations


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")  # Java strings may hold lone surrogates
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def utils_abs(n: int) -> int:
    """Kafka's Utils.abs: abs(Integer.MIN_VALUE) is 0 rather than Java's negative overflow."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(key: str, num_partitions: int) -> int:
    """The coordinator partition that owns a group id or transactional id."""
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return utils_abs(java_string_hashcode(key)) % num_partitions


def share_coordinator_key(group_id: str, topic_id: str, partition: int) -> str:
    """The key a share partition's state is found by (Kafka's SharePartitionKey
    asCoordinatorKey), hashed as a group id is."""
    return f"{group_id}:{topic_id}:{partition}"


def state_partition_for(group_id: str, topic_id: str, partition: int, num_partitions: int) -> int:
    """The share-group state partition that owns a share partition."""
    return partition_for(share_coordinator_key(group_id, topic_id, partition), num_partitions)


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (seed 0x9747b28c), as a signed 32-bit int."""
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = length4 * 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's Utils.toPositive, used by the default partitioner."""
    return n & 0x7FFFFFFF


def default_partition(key: bytes, num_partitions: int) -> int:
    """Kafka's BuiltInPartitioner.partitionForKey."""
    return to_positive(murmur2(key)) % num_partitions
