"""Sans-I/O cores of the clients: what a consumer, share consumer and producer decide, given
responses and the time; the actors in actors/ carry the requests."""
