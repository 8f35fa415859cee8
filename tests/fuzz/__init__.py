"""
Property-based tests over every parser and engine that reads untrusted input.

Each property is the same contract: a function returns a value or raises
the error its documentation names (a L{StatusError} with a 4xx code, or
the module's own error type), never anything else, and within a bounded
time. Round trips are checked where a form can be written back.
"""
