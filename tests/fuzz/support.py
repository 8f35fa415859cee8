"""
What the fuzz tests share: one reproducible hypothesis profile, the contract
check, and strategies for JSON values and hostile text.
"""

import os
import time

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from orchd.api.errors import StatusError

#: No example database and a derandomized search: every run (CI included)
#: tries the same examples, so a failure is reproducible by running again.
_PROFILE = dict(deadline=None, derandomize=True, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


#: ORCHD_FUZZ_SCALE=20 runs every property with twenty times its examples,
#: from a random start: a longer hunt by hand, not for CI.
_SCALE = int(os.environ.get("ORCHD_FUZZ_SCALE", "0") or 0)


def fuzz(examples):
    """The settings of one property: C{examples} examples, reproducible."""
    if _SCALE:
        return settings(max_examples=examples * _SCALE,
                        **dict(_PROFILE, derandomize=False))
    return settings(max_examples=examples, **_PROFILE)


#: The longest one call on one example may take: generous for a loaded
#: 2-core machine, far below anything a client could notice as a stall.
SECONDS = 2.0


class Outcome:
    """What one bounded call did: its C{value}, or the documented C{error}."""

    __slots__ = ("value", "error")

    def __init__(self, value=None, error=None):
        self.value = value
        self.error = error


def bounded(test, function, *args, errors=(), seconds=SECONDS, **kwargs):
    """
    Call C{function}; fail C{test} unless it returns, or raises a
    L{StatusError} with a 4xx code or one of C{errors}, within C{seconds}
    of this thread's CPU time (not wall time: a busy machine must not fail
    a decoder that does little work). Anything else propagates, so
    hypothesis shrinks and reports it.
    """
    start = time.thread_time()
    try:
        outcome = Outcome(value=function(*args, **kwargs))
    except StatusError as e:
        if not 400 <= e.code < 500:
            test.fail(f"{function.__qualname__} answered {e.code} {e.reason}: {e.message}")
        outcome = Outcome(error=e)
    except errors as e:
        outcome = Outcome(error=e)
    elapsed = time.thread_time() - start
    if elapsed > seconds:
        test.fail(f"{function.__qualname__} took {elapsed:.2f} s (bound {seconds} s)")
    return outcome


# -- strategies ------------------------------------------------------------------

#: Numbers a JSON or YAML document may carry, the awkward ones above all.
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.sampled_from([0, -1, 1 << 31, (1 << 31) - 1, -(1 << 31) - 1, 1 << 63, (1 << 63) - 1,
                     -(1 << 63), -(1 << 63) - 1, 1 << 64, 10 ** 30, 2.5, -0.0, 1e308, 3.0]),
    st.floats(allow_nan=False, allow_infinity=False),
)

scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=12))

keys = st.one_of(st.sampled_from(["metadata", "name", "spec", "status", "data", "items",
                                  "labels", "containers", "ports", "$patch", "$retainKeys",
                                  "", "a", "b", "c"]),
                 st.text(max_size=6))


def json_values(leaves=30):
    """Any JSON value, small enough to work on quickly."""
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=5)),
        max_leaves=leaves)


def json_objects(leaves=30):
    return st.dictionaries(keys, json_values(leaves), max_size=6)


def as_decoded(value):
    """C{value} as a body decoder hands it over: integers past 64 bits are floats."""
    if isinstance(value, dict):
        return {k: as_decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_decoded(v) for v in value]
    if type(value) is int and not -(1 << 63) <= value < (1 << 64):
        return float(value)
    return value
