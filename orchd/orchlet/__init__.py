"""The node agent: its HTTPS endpoint, its heartbeats and the pods it runs."""
