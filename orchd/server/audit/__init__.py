"""
The audit log: which requests are recorded at which level (L{policy}), the
events of one request (L{record}), and where they go (L{interfaces},
L{logbackend}, L{webhook}).
"""
