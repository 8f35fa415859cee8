"""Text of the current second, made once a second."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.timing.seconds import micro_time, micro_times, second_text


class SecondTextTests(SynchronousTestCase):
    def test_rendered_once_a_second(self):
        """Times within one second share one rendering; the next second renders again."""
        rendered = []
        text = second_text(lambda second: rendered.append(second) or f"s{second:.0f}")
        self.assertEqual([text(10.0), text(10.5), text(10.99), text(11.2), text(11)],
                         ["s10", "s10", "s10", "s11", "s11"])
        self.assertEqual(rendered, [10, 11])


class MicroTimeTests(SynchronousTestCase):
    def test_six_digits_and_z(self):
        """A MicroTime has six digits of fraction, leading zeros kept, and a Z."""
        self.assertEqual(micro_time(1617954608.137166), "2021-04-09T07:50:08.137166Z")
        self.assertEqual(micro_time(1617954608.0), "2021-04-09T07:50:08.000000Z")
        self.assertEqual(micro_time(1617954608.000042), "2021-04-09T07:50:08.000042Z")
        self.assertEqual(micro_time(1617954608.01), "2021-04-09T07:50:08.010000Z")

    def test_rounded_into_the_next_second(self):
        """Rounded to the nearest microsecond, as datetime rounds: the second moves too."""
        self.assertEqual(micro_time(1617954608.9999996), "2021-04-09T07:50:09.000000Z")
        self.assertEqual(micro_time(1617954608.9999994), "2021-04-09T07:50:08.999999Z")

    def test_before_the_epoch(self):
        """A time before 1970 rounds to the nearest microsecond too, not towards zero."""
        self.assertEqual(micro_time(-0.5), "1969-12-31T23:59:59.500000Z")
        self.assertEqual(micro_time(-0.0000004), "1970-01-01T00:00:00.000000Z")

    def test_seconds_alternating(self):
        """Times of two seconds in turn each get their own second's text."""
        self.assertEqual([micro_time(t) for t in (100.5, 99.25, 100.75)],
                         ["1970-01-01T00:01:40.500000Z", "1970-01-01T00:01:39.250000Z",
                          "1970-01-01T00:01:40.750000Z"])

    def test_two_at_once(self):
        """Two times give what each gives alone, in one second or across two."""
        for first, then in ((1617954608.137166, 1617954608.5), (1617954608.9999996, 1617954609.25),
                            (99.75, 100.0000004), (100.5, 99.25)):
            self.assertEqual(micro_times(first, then), (micro_time(first), micro_time(then)))
