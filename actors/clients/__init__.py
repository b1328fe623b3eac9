"""The client actors and their facades: consumer, share consumer, producer, admin."""
