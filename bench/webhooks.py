"""
The cost of an admission webhook: durable ConfigMap creates at 16
connections on one orchd, with and without one ValidatingWebhookConfiguration
whose webhook (webhook_server.js, a minimal allowing HTTPS server in a
Node.js process of its own, on loopback) matches them, alternated over the
rounds.
"""

import base64
import os
import subprocess
import sys

from common import HERE, ROOT, Orchd, free_port, hload, pinned, summarize

NAMESPACE = "bench-webhooks"
CONFIGMAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
CONFIGURATION = "/apis/admissionregistration.orch.io/v1/validatingwebhookconfigurations"


def webhook_credentials(workdir):
    """A CA of the webhook's own and a serving certificate for 127.0.0.1: (bundle, cert, key)."""
    sys.path.insert(0, ROOT)
    from orchd.tls.certs import certificate_pem, create_ca, issue_certificate, private_key_pem
    ca, ca_key = create_ca("bench-webhook-ca")
    cert, key = issue_certificate(ca, ca_key, "webhook", names=["127.0.0.1"], server=True)
    paths = []
    for name, data in (("webhook.crt", certificate_pem(cert)),
                       ("webhook.key", private_key_pem(key))):
        path = os.path.join(workdir, name)
        with open(path, "wb") as f:
            f.write(data)
        paths.append(path)
    return base64.b64encode(certificate_pem(ca)).decode(), *paths


def configuration(port, bundle):
    return {"apiVersion": "admissionregistration.orch.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "bench"},
            "webhooks": [{
                "name": "bench.webhooks.example.com", "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": f"https://127.0.0.1:{port}/validate", "caBundle": bundle},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                           "resources": ["configmaps"]}],
                "namespaceSelector": {"matchLabels": {"bench": "webhooks"}}}]}


def webhook_cases(workdir, args, body_path, report):
    """create@16 without and with the webhook, alternated over the rounds."""
    print("webhooks: create@16 with one validating webhook against none", file=sys.stderr)
    bundle, cert, key = webhook_credentials(workdir)
    port = free_port()
    # The webhook shares core 1 with the load generator: orchd keeps core 0 to itself.
    webhook = subprocess.Popen(
        pinned(1, ["node", os.path.join(HERE, "webhook_server.js"), "--port", str(port),
                   "--cert", cert, "--key", key]),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    orchd = None
    try:
        webhook.stdout.readline()
        orchd = Orchd(workdir, "--no-orchlet")
        orchd.request("POST", "/api/v1/namespaces", {
            "metadata": {"name": NAMESPACE, "labels": {"bench": "webhooks"}}})
        results = {}
        for round_number in range(args.rounds):
            print(f"webhooks {round_number + 1}/{args.rounds}", file=sys.stderr)
            order = ["none", "webhook"] if round_number % 2 == 0 else ["webhook", "none"]
            for name in order:
                if name == "webhook":
                    status, data = orchd.request("POST", CONFIGURATION,
                                                 configuration(port, bundle))
                    if status != 201:
                        raise SystemExit(f"webhooks setup failed: {status} {data[:200]!r}")
                run = hload(orchd, orchd.url + CONFIGMAPS, 16, args.secs, "POST", body_path,
                            gen_name=True)
                results.setdefault(name, []).append(run)
                if name == "webhook":
                    orchd.request("DELETE", CONFIGURATION + "/bench")
    finally:
        if orchd is not None:
            orchd.stop()
        webhook.terminate()
        webhook.wait(30)
    summary = {name: summarize(runs) for name, runs in results.items()}
    summary["ratio"] = round(summary["webhook"]["rps"] / summary["none"]["rps"], 3)
    summary["ratio_rounds"] = [round(a["rps"] / b["rps"], 3)
                               for a, b in zip(results["webhook"], results["none"])]
    report["webhooks"] = summary


def print_webhooks(report):
    if "webhooks" not in report:
        return
    w = report["webhooks"]
    hooked, plain = w["webhook"], w["none"]
    errors = sum(r["errors"] + r["non_2xx"] for r in (hooked, plain))
    print(f"webhooks: create@16 with one validating webhook {hooked['rps']:.0f}/s "
          f"(p50 {hooked['p50_ms']:.2f} ms, p99 {hooked['p99_ms']:.2f} ms), without "
          f"{plain['rps']:.0f}/s (p50 {plain['p50_ms']:.2f} ms, p99 {plain['p99_ms']:.2f} ms): "
          f"ratio {w['ratio']:.3f} (rounds {', '.join(f'{r:.3f}' for r in w['ratio_rounds'])}; "
          f"target >= 0.5)" + (f"; errors {errors}" if errors else ""))
