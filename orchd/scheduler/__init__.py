"""
The scheduler: pods without a node are given one.

It runs in the process that holds the controllers' Lease, beside them
(L{orchd.scheduler.scheduler.Scheduler}); it reads pods and nodes from
informers into its own cache (L{orchd.scheduler.cache}), takes pending pods
from a queue with per-pod backoff (L{orchd.scheduler.queue}), runs the
filter and score plugins (one module each: L{nodeunschedulable},
L{tainttoleration}, L{nodeaffinity}, L{nodeports}, L{noderesources},
L{selectorspread}) through L{orchd.scheduler.framework}, and binds through
the API's C{pods/binding} (L{orchd.scheduler.binder}).
"""
