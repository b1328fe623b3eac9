"""The Kafka gateway: a broker to Kafka's own clients (actor.py), one module per group of APIs."""
