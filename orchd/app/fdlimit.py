# -*- test-case-name: tests.app.test_fdlimit -*-
"""
The open-file limit: every connection, watch included, holds a descriptor.

Many systems start processes with a soft limit of 1024 and a much higher
hard one; a server that keeps the soft limit runs out with a thousand
watches or idle clients. Raising the soft limit to the hard one needs no
privilege.
"""

import resource

from twisted.logger import Logger

log = Logger()


def raise_open_file_limit(rlimit=resource):
    """
    Raise the soft C{RLIMIT_NOFILE} to the hard limit, and log the result.

    @param rlimit: the C{resource} module, or a fake of its C{getrlimit},
        C{setrlimit}, C{RLIMIT_NOFILE} and C{RLIM_INFINITY} for tests.
    @return: the soft limit in force afterwards.
    """
    soft, hard = rlimit.getrlimit(rlimit.RLIMIT_NOFILE)
    if soft == hard or (hard != rlimit.RLIM_INFINITY and soft > hard):
        log.info("Open-file limit: {soft}", soft=soft)
        return soft
    try:
        rlimit.setrlimit(rlimit.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:
        # e.g. an unlimited hard limit the kernel will not take as a soft one.
        log.warn("Open-file limit left at {soft}: cannot raise it to {hard}: {error}",
                 soft=soft, hard=_text(rlimit, hard), error=e)
        return soft
    log.info("Open-file limit raised from {soft} to {hard}", soft=soft, hard=_text(rlimit, hard))
    return hard


def _text(rlimit, value):
    return "unlimited" if value == rlimit.RLIM_INFINITY else value
