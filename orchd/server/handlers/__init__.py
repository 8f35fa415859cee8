"""One handler per verb; each takes a L{scope.RequestScope}."""

from orchd.server.handlers import create, delete, get, list, patch, update, watch

VERB_HANDLERS = {
    "get": get.handle,
    "list": list.handle,
    "watch": watch.handle,
    "create": create.handle,
    "update": update.handle,
    "patch": patch.handle,
    "delete": delete.handle,
    "deletecollection": delete.handle_collection,
}
