"""The metric families and their Prometheus text, read back by prometheus_client's parser."""

from prometheus_client.parser import text_string_to_metric_families
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.metrics import (
    Counter, Histogram, Registry, exponential_buckets, format_value, linear_buckets)


def parse(registry):
    """C{{family name: family}} of the registry's exposition, as Prometheus reads it."""
    text = registry.expose().decode("utf-8")
    return {family.name: family for family in text_string_to_metric_families(text)}


class FormatTests(SynchronousTestCase):
    def test_values_as_go_writes_them(self):
        """Integral floats lose their point (the mixin selects le="1"), others keep repr."""
        self.assertEqual([format_value(v) for v in (1.0, 0.005, 60, 1e-08, float("inf"),
                                                    float("-inf"), 2.5, 0)],
                         ["1", "0.005", "60", "1e-08", "+Inf", "-Inf", "2.5", "0"])
        self.assertEqual(format_value(float("nan")), "NaN")

    def test_bucket_helpers(self):
        """Upstream's ExponentialBuckets and LinearBuckets."""
        self.assertEqual(exponential_buckets(1, 2, 4), (1, 2, 4, 8))
        self.assertEqual(linear_buckets(0, 5, 3), (0, 5, 10))


class CounterTests(SynchronousTestCase):
    def test_counts_per_label_tuple(self):
        """inc adds to the child of its label tuple; labels() hands out the same child."""
        registry = Registry()
        counter = registry.counter("things_total", "Things.", ("kind", "code"))
        counter.inc(("a", "200"))
        counter.inc(("a", "200"), 2)
        counter.labels("b", "500").inc()
        self.assertEqual(counter.value("a", "200"), 3)
        self.assertEqual(counter.value("b", "500"), 1)
        self.assertEqual(counter.value("c", "404"), 0)
        samples = {tuple(sorted(s.labels.items())): s.value
                   for s in parse(registry)["things"].samples}
        self.assertEqual(samples, {(("code", "200"), ("kind", "a")): 3.0,
                                   (("code", "500"), ("kind", "b")): 1.0})

    def test_wrong_label_count_refused(self):
        """A label tuple of the wrong length is a ValueError, not a malformed series."""
        counter = Counter("x_total", "X.", ("a",))
        self.assertRaises(ValueError, counter.inc, ("1", "2"))

    def test_hostile_label_values_escaped(self):
        """Quotes, backslashes and newlines in label values survive the round trip."""
        registry = Registry()
        value = 'a"b\\c\nd}'
        registry.counter("odd_total", "Odd.\nHelp \\ text", ("v",)).inc((value,))
        family = parse(registry)["odd"]
        self.assertEqual(family.samples[0].labels["v"], value)
        self.assertEqual(family.documentation, "[ALPHA] Odd.\nHelp \\ text")


class GaugeTests(SynchronousTestCase):
    def test_set_inc_dec(self):
        """A gauge is set, raised and lowered per label tuple."""
        registry = Registry()
        gauge = registry.gauge("level", "Level.", ("q",))
        gauge.set(("a",), 5)
        gauge.inc(("a",))
        gauge.dec(("a",), 3)
        self.assertEqual(gauge.value("a"), 3)
        family = parse(registry)["level"]
        self.assertEqual(family.type, "gauge")
        self.assertEqual(family.samples[0].value, 3.0)


class HistogramTests(SynchronousTestCase):
    def test_buckets_are_cumulative_and_le_inclusive(self):
        """A value equal to a bound counts in that bucket; buckets, sum and count parse."""
        registry = Registry()
        histogram = registry.histogram("wait_seconds", "Wait.", ("op",), (0.1, 1, 5))
        for value in (0.05, 0.1, 1, 3, 7):
            histogram.observe(("get",), value)
        family = parse(registry)["wait_seconds"]
        buckets = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
        self.assertEqual(buckets, {"0.1": 2.0, "1": 3.0, "5": 4.0, "+Inf": 5.0})
        totals = {s.name: s.value for s in family.samples if not s.name.endswith("_bucket")}
        self.assertEqual(totals, {"wait_seconds_count": 5.0, "wait_seconds_sum": 11.15})
        self.assertEqual(histogram.child("get").count, 5)

    def test_gathering_counts_alike(self):
        """
        A gathering histogram counts what it gathered when read, folded or
        scraped: its exposition is the one of a histogram that counts at once.
        """
        registry, counting = Registry(), Registry()
        gathering = registry.histogram("wait_seconds", "Wait.", ("op",), (0.1, 1, 5), gather=True)
        at_once = counting.histogram("wait_seconds", "Wait.", ("op",), (0.1, 1, 5))
        child = gathering.labels("get")
        for value in (0.05, 0.1, 1, 3, 7):
            child.observe(value)
            at_once.observe(("get",), value)
        gathering.observe(("put",), 0.5)
        at_once.observe(("put",), 0.5)
        self.assertEqual(child._counts, [0, 0, 0, 0])
        self.assertEqual(registry.expose(), counting.expose())
        self.assertEqual((child.count, child.sum), (5, 11.15))
        child.observe(2)
        self.assertEqual(child._sum, 11.15)
        registry.fold()
        self.assertEqual((child._sum, child._gathered), (13.15, []))
        self.assertEqual(dict(child.cumulative())[5.0], 5)

    def test_le_label_refused(self):
        """A histogram may not have its own le label."""
        self.assertRaises(ValueError, Histogram, "h", "H.", ("le",), (1,))

    def test_unlabelled(self):
        """A histogram without labels writes bare sample names."""
        registry = Registry()
        registry.histogram("h", "H.", (), (1,)).observe((), 0.5)
        self.assertIn(b'h_bucket{le="1"} 1\n', registry.expose())
        self.assertIn(b"h_count 1\n", registry.expose())


class RegistryTests(SynchronousTestCase):
    def test_callback_read_at_scrape(self):
        """A callback family is asked for its samples at each scrape."""
        registry = Registry()
        values = [1]
        registry.callback("size", "Size.", ("r",), lambda: [(("pods",), values[0])])
        values[0] = 7
        self.assertEqual(parse(registry)["size"].samples[0].value, 7.0)

    def test_failing_callback_left_out(self):
        """A callback that raises drops its family, not the scrape."""
        registry = Registry()
        registry.counter("ok_total", "OK.").inc()

        def broken():
            raise OSError("no /proc")
        registry.callback("broken", "Broken.", (), broken)
        self.assertEqual(set(parse(registry)), {"ok"})

    def test_duplicate_names_refused(self):
        """Two families of one name in a registry are refused."""
        registry = Registry()
        registry.counter("a_total", "A.")
        self.assertRaises(ValueError, registry.gauge, "a_total", "A.")

    def test_included_registry(self):
        """An included registry's families are exposed after the registry's own."""
        shared, own = Registry(), Registry()
        shared.counter("shared_total", "S.").inc()
        own.gauge("own", "O.").set((), 1)
        own.include(shared)
        self.assertEqual(list(parse(own)), ["own", "shared"])

    def test_selected_names(self):
        """expose(names) writes only the named families."""
        registry = Registry()
        registry.counter("a_total", "A.").inc()
        registry.counter("b_total", "B.").inc()
        self.assertEqual(list(parse_text(registry.expose({"b_total"}))), ["b"])


def parse_text(data):
    return {f.name: f for f in text_string_to_metric_families(data.decode("utf-8"))}
