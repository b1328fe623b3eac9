"""The clients: consumer (a client actor and its facade), share consumer (a facade and its
network thread), producer, admin."""
