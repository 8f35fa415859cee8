# -*- test-case-name: tests.auth.test_authn -*-
"""Who is asking: the user a request was authenticated as."""

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
MASTERS = "system:masters"


class UserInfo:
    """
    An authenticated (or anonymous) user: name, uid, groups and extra values.

    Immutable in practice: filters build a new one rather than editing.
    """

    __slots__ = ("name", "uid", "groups", "extra", "_shared")

    def __init__(self, name, groups=(), uid="", extra=None):
        self.name = name
        self.uid = uid
        self.groups = tuple(groups)
        self.extra = dict(extra or {})
        self._shared = None

    def __eq__(self, other):
        return isinstance(other, UserInfo) and (self.name, self.uid, self.groups, self.extra) == (
            other.name, other.uid, other.groups, other.extra)

    def __repr__(self):
        return f"<UserInfo {self.name!r} groups={list(self.groups)}>"

    def with_group(self, group):
        """This user with C{group} added, if missing."""
        if group in self.groups:
            return self
        return UserInfo(self.name, self.groups + (group,), self.uid, self.extra)

    def to_dict(self):
        """The C{UserInfo} shape of the authentication API."""
        data = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            data["uid"] = self.uid
        if self.extra:
            data["extra"] = {k: list(v) for k, v in self.extra.items()}
        return data

    def shared_dict(self):
        """
        L{to_dict}, made once: every audit event of a connection's user
        holds the same dict, so it must be read and never changed.
        """
        shared = self._shared
        if shared is None:
            shared = self._shared = self.to_dict()
        return shared


ANONYMOUS_USER = UserInfo(ANONYMOUS, (UNAUTHENTICATED,))
