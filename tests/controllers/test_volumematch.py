"""Which volume a claim binds to: upstream's findMatchingVolume."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.volumematch import (
    ClaimView, ClassView, VolumeView, find_best_match, satisfies,
)


def volume(name, size="1Gi", phase="Available", modes=("ReadWriteOnce",), claim_ref=None,
           **spec):
    body = dict({"capacity": {"storage": size}, "accessModes": list(modes)}, **spec)
    if claim_ref is not None:
        body["claimRef"] = claim_ref
    return VolumeView({"metadata": {"name": name}, "spec": body, "status": {"phase": phase}})


def claim(size="1Gi", modes=("ReadWriteOnce",), uid="u1", **spec):
    return ClaimView({"metadata": {"name": "data", "namespace": "ns", "uid": uid},
                      "spec": dict({"accessModes": list(modes),
                                    "resources": {"requests": {"storage": size}}}, **spec)})


class FindBestMatchTests(SynchronousTestCase):
    def test_smallest_that_fits(self):
        """Of the volumes big enough, the smallest is chosen."""
        volumes = [volume("a", "10Gi"), volume("b", "1500Mi"), volume("c", "1Gi")]
        self.assertEqual(find_best_match(claim("1100Mi"), volumes).name, "b")

    def test_prebound_wins(self):
        """A volume whose claimRef names the claim wins over a better fit."""
        volumes = [volume("fit"), volume("mine", "9Gi", phase="Bound",
                                         claim_ref={"namespace": "ns", "name": "data"})]
        self.assertEqual(find_best_match(claim(), volumes).name, "mine")

    def test_claimed_by_other_uid_skipped(self):
        """A volume bound to an earlier claim of the same name (other uid) is not taken."""
        volumes = [volume("old", claim_ref={"namespace": "ns", "name": "data", "uid": "u0"})]
        self.assertIsNone(find_best_match(claim(), volumes))

    def test_not_available_skipped(self):
        """Pending, Released and Failed volumes are not taken."""
        volumes = [volume(p, phase=p) for p in ("Pending", "Released", "Failed")]
        self.assertIsNone(find_best_match(claim(), volumes))

    def test_volume_mode(self):
        """A Block claim takes only a Block volume."""
        volumes = [volume("fs"), volume("blk", volumeMode="Block")]
        self.assertEqual(find_best_match(claim(volumeMode="Block"), volumes).name, "blk")

    def test_delay_binding_takes_only_prebound(self):
        """A claim waiting for its consumer, with no node chosen, takes only its pre-bound volume."""
        self.assertIsNone(find_best_match(claim(), [volume("free")], delay_binding=True))

    def test_reachable(self):
        """Volumes the chosen node cannot reach are passed over."""
        volumes = [volume("far"), volume("near", "2Gi")]
        match = find_best_match(claim(), volumes, reachable=lambda v: v.name == "near",
                                delay_binding=True)
        self.assertEqual(match.name, "near")

    def test_bad_selector_matches_nothing(self):
        """A selector upstream would refuse matches no volume rather than raising."""
        bad = claim(selector={"matchExpressions": [{"key": "a", "operator": "Near"}]})
        self.assertIsNone(find_best_match(bad, [volume("v")]))

    def test_satisfies(self):
        """Upstream's reasons a named volume cannot serve a claim."""
        self.assertEqual(satisfies(volume("v", "1Mi"), claim()), "requested PV is too small")
        self.assertEqual(satisfies(volume("v", storageClassName="x"), claim()),
                         "storageClassName does not match")
        self.assertEqual(satisfies(volume("v", modes=("ReadOnlyMany",)), claim()),
                         "incompatible accessMode")
        self.assertIsNone(satisfies(volume("v"), claim()))

    def test_unparseable_sizes(self):
        """A size that is no quantity counts as zero, not as an error."""
        self.assertEqual(claim(size="lots").request, 0)
        self.assertEqual(volume("v", size=None).capacity, 0)

    def test_class_defaults(self):
        """A class without a mode binds at once and reclaims with Delete."""
        view = ClassView({"metadata": {"name": "x"}, "provisioner": "p"})
        self.assertEqual((view.binding_mode, view.reclaim_policy, view.delays_binding),
                         ("Immediate", "Delete", False))
        self.assertFalse(ClassView({"metadata": {"name": "y"},
                                    "provisioner": "kubernetes.io/no-provisioner"}).provisions)
