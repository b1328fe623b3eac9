"""Authentication of Kafka clients: SCRAM and PLAIN against Kafka-format credentials, and the
per-connection SASL state machine the gateway runs before it serves anything else."""
