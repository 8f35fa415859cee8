"""
Admission webhooks: the validating and mutating webhook configurations'
webhooks called with an C{AdmissionReview} on every write they match.

L{orchd.admission.webhook.conditions} compiles C{matchConditions} (CEL),
L{orchd.admission.webhook.matching} decides which webhooks a write goes
to, L{orchd.admission.webhook.review} writes the review and reads the
answer, L{orchd.admission.webhook.caller} makes the HTTPS call and
L{orchd.admission.webhook.plugin} is the admission plugin that follows
the configurations and runs them.
"""
