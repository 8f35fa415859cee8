"""Coloured things: the stored objects the watch cache and cached-reads tests write."""

import orjson

PREFIX = "/registry/things/"


def thing(name, colour):
    return orjson.dumps({"metadata": {"name": name, "uid": f"uid-{name}"}, "colour": colour})


class StoreWrites:
    """Tests writing things of a colour into C{self.store}."""

    def write(self, name, colour):
        key = PREFIX + name
        current = self.successResultOf(self.store.get(key))
        if current is None:
            return self.successResultOf(self.store.create(key, thing(name, colour)))
        return self.successResultOf(self.store.update(key, thing(name, colour),
                                                      current.mod_revision))
