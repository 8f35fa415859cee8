# -*- test-case-name: tests.auth.test_authz -*-
"""The attributes authorization looks at, as the specification lists them."""


class Attributes:
    """
    One request as authorizers see it.

    @ivar path: the URL path, for non-resource requests.
    @ivar verb: the API verb (resource requests) or lowercase HTTP method.
    """

    __slots__ = (
        "user", "verb", "is_resource_request", "path", "namespace", "api_group",
        "api_version", "resource", "subresource", "name",
    )

    def __init__(self, user, verb, is_resource_request=True, path="", namespace="",
                 api_group="", api_version="", resource="", subresource="", name=""):
        self.user = user
        self.verb = verb
        self.is_resource_request = is_resource_request
        self.path = path
        self.namespace = namespace
        self.api_group = api_group
        self.api_version = api_version
        self.resource = resource
        self.subresource = subresource
        self.name = name

    @classmethod
    def from_request_info(cls, user, info):
        return cls(
            user, info.verb, info.is_resource_request, info.path, info.namespace,
            info.api_group, info.api_version, info.resource, info.subresource, info.name,
        )

    def __repr__(self):
        if not self.is_resource_request:
            return f"<Attributes {self.user.name} {self.verb} {self.path}>"
        return (
            f"<Attributes {self.user.name} {self.verb} {self.api_group}/{self.resource}"
            f"/{self.subresource} ns={self.namespace!r} name={self.name!r}>"
        )

    def describe_denial(self):
        """The upstream sentence after C{is forbidden: }."""
        user = self.user.name
        if not self.is_resource_request:
            return f'User "{user}" cannot {self.verb} path "{self.path}"'
        resource = self.resource + (f"/{self.subresource}" if self.subresource else "")
        where = (
            f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        )
        return (
            f'User "{user}" cannot {self.verb} resource "{resource}" in API group '
            f'"{self.api_group}" {where}'
        )
