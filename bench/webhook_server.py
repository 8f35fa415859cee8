#!/usr/bin/env python3
"""
A minimal admission webhook for the ``webhooks`` bench case: every review
is allowed, over HTTPS, with access logging off.

Usage: webhook_server.py --port PORT --cert CERT --key KEY
Prints ``ready`` once listening.
"""
import argparse
import sys

import orjson
from twisted.internet import reactor, ssl
from twisted.web import resource, server


class Allow(resource.Resource):
    isLeaf = True

    def render_POST(self, request):
        review = orjson.loads(request.content.read())
        request.setHeader(b"content-type", b"application/json")
        return orjson.dumps({"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                             "response": {"uid": review["request"]["uid"], "allowed": True}})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args()
    with open(args.cert, "rb") as f:
        cert = f.read()
    with open(args.key, "rb") as f:
        key = f.read()
    options = ssl.PrivateCertificate.loadPEM(cert + key).options()
    site = server.Site(Allow())
    site.log = lambda request: None
    reactor.listenSSL(args.port, site, options, interface="127.0.0.1")
    reactor.callWhenRunning(lambda: (print("ready"), sys.stdout.flush()))
    reactor.run()


if __name__ == "__main__":
    main()
