"""Resource amounts: what a pod requests and what a node has, as upstream counts them."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.scheduler.resources import amount, container_requests, pod_requests, resource_list


def container(requests=None, limits=None, **extra):
    resources = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return dict({"name": "c", "resources": resources}, **extra)


class AmountTests(SynchronousTestCase):
    def test_units(self):
        """cpu counts millicores, everything else base units, each rounded up."""
        self.assertEqual(amount("cpu", "100m"), 100)
        self.assertEqual(amount("cpu", "1.5"), 1500)
        self.assertEqual(amount("cpu", "0.0001"), 1)
        self.assertEqual(amount("memory", "1Gi"), 2 ** 30)
        self.assertEqual(amount("memory", "1.5"), 2)
        self.assertEqual(amount("pods", "110"), 110)

    def test_json_numbers(self):
        """JSON numbers are read as their text, as upstream's decoder reads them."""
        self.assertEqual(amount("cpu", 2), 2000)
        self.assertEqual(amount("cpu", 0.5), 500)
        self.assertEqual(amount("memory", 1e3), 1000)

    def test_not_quantities(self):
        """Malformed values, booleans and other types count as absent."""
        for value in ("lots", True, None, [], {}):
            self.assertIsNone(amount("cpu", value), value)
        self.assertEqual(resource_list({"cpu": "1", "memory": "bad", "pods": None}),
                         {"cpu": 1000})
        self.assertEqual(resource_list(["cpu"]), {})


class PodRequestsTests(SynchronousTestCase):
    def test_containers_add_up(self):
        """Containers' requests are summed per resource."""
        spec = {"containers": [container({"cpu": "100m", "memory": "1Gi"}),
                               container({"cpu": "250m", "example.com/gpu": "1"})]}
        self.assertEqual(pod_requests(spec), {"cpu": 350, "memory": 2 ** 30,
                                              "example.com/gpu": 1})

    def test_limits_stand_for_missing_requests(self):
        """A resource with a limit and no request requests its limit."""
        self.assertEqual(container_requests(container({"cpu": "100m"},
                                                      {"cpu": "1", "memory": "1Gi"})),
                         {"cpu": 100, "memory": 2 ** 30})

    def test_init_containers_peak(self):
        """The pod needs at least its largest init container, not the sum of them."""
        spec = {"containers": [container({"cpu": "100m"})],
                "initContainers": [container({"cpu": "1"}), container({"cpu": "500m",
                                                                       "memory": "1Ki"})]}
        self.assertEqual(pod_requests(spec), {"cpu": 1000, "memory": 1024})

    def test_sidecars_run_beside(self):
        """Restartable init containers add to the containers and to later init containers."""
        spec = {"containers": [container({"cpu": "100m"})],
                "initContainers": [container({"cpu": "200m"}, restartPolicy="Always"),
                                   container({"cpu": "1"})]}
        self.assertEqual(pod_requests(spec), {"cpu": 1200})

    def test_overhead(self):
        """The pod's overhead is added."""
        spec = {"containers": [container({"cpu": "100m"})], "overhead": {"cpu": "50m"}}
        self.assertEqual(pod_requests(spec), {"cpu": 150})

    def test_non_zero_defaults(self):
        """For scoring, unset cpu and memory count 100m and 200Mi; explicit zeros stay zero."""
        spec = {"containers": [container(), container({"cpu": "0"})]}
        self.assertEqual(pod_requests(spec), {"cpu": 0})
        self.assertEqual(pod_requests(spec, non_zero=True),
                         {"cpu": 100, "memory": 2 * 200 * 2 ** 20})

    def test_malformed_spec(self):
        """Containers that are not objects, and resources that are not maps, count nothing."""
        spec = {"containers": ["c", {"name": "x", "resources": "lots"}, {"resources": None}],
                "initContainers": "none"}
        self.assertEqual(pod_requests(spec), {})
