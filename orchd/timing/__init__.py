"""
Time for the hot paths: many timers on one reactor timer
(L{orchd.timing.timers}), text of a time made once a second
(L{orchd.timing.seconds}).
"""
