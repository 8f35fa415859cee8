# -*- test-case-name: tests.app.test_config -*-
"""
The command line of C{twistd orchd}: flags in, a service tree out.

L{Options} only collects text (every default is C{None}, meaning "not
given"); C{orchd.app.config} converts and checks it. Errors leave as one line
on stderr and exit status 2, instead of twistd's habit of printing the whole
help text for a usage error.
"""

import gc
import sys

from twisted.python import usage

from orchd.app import collector
from orchd.app.config import BOOLEAN_FLAGS, SETTINGS, SETTINGS_BY_FLAG, Config, ConfigError
from orchd.app.logformat import ProcessLogging
from orchd.app.service import make_service

PROGRAM = "twistd orchd"


def _help(setting):
    if setting.default_text is None:
        return setting.help
    shown = setting.default_text if setting.default_text != "" else '""'
    return f"{setting.help} [default: {shown}]"


def _expand_boolean_flags(arguments):
    """
    Rewrite a bare C{--flag} of a boolean setting as C{--flag=true}.

    Kubernetes writes booleans as C{--anonymous-auth} or C{--anonymous-auth=false};
    C{usage} parameters always take a value, so the bare form is spelled out
    here. The value of a preceding C{--flag value} and everything after
    C{--} are left alone.
    """
    expanded = []
    takes_value = False
    for position, argument in enumerate(arguments):
        if takes_value:
            takes_value = False
            expanded.append(argument)
        elif argument == "--":
            expanded.extend(arguments[position:])
            break
        elif argument.startswith("--") and "=" not in argument:
            name = argument[2:]
            if name in BOOLEAN_FLAGS:
                argument += "=true"
            elif name in SETTINGS_BY_FLAG:
                takes_value = True
            expanded.append(argument)
        else:
            expanded.append(argument)
    return expanded


class Options(usage.Options):
    """Flags of C{twistd orchd}; names and meaning as in the project's CONTRACT."""

    synopsis = "[options]"
    longdesc = ("Run a Kubernetes-style control plane: API server, controllers and a node "
                "agent on one reactor. Boolean flags are written --flag or --flag=false.")
    optParameters = [[setting.flag, None, None, _help(setting)] for setting in SETTINGS]

    def parseOptions(self, options=None):
        """
        Parse, check and convert; on any error print one line and exit 2.

        The converted L{Config} is kept as C{self.settings} for L{makeService}.
        """
        if options is None:
            options = sys.argv[1:]
        try:
            super().parseOptions(_expand_boolean_flags(list(options)))
        except (usage.UsageError, ConfigError) as error:
            message = " ".join(str(error).split())
            sys.stderr.write(f"{PROGRAM}: error: {message}\n")
            sys.stderr.flush()
            raise SystemExit(2) from None

    def postOptions(self):
        self.settings = Config.load(self)


def makeService(options):
    """The service tree; wired in orchd.app.service."""
    config = getattr(options, "settings", None) or Config.load(options)
    service = make_service(config)
    # twistd's own options (--logfile, -n) say where the log goes.
    service = ProcessLogging(service, getattr(options, "parent", None), config.log_format)
    # The modules, classes and tables loaded by now live as long as the
    # process: out of every full garbage collection, as what survives each
    # full collection from now on (orchd.app.collector says why).
    collector.install(gc)
    # twistd has installed its reactor by now.
    from twisted.internet import reactor
    collector.PacedCollections(reactor, gc).setServiceParent(service)
    return service
