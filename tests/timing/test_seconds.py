"""Text of the current second, made once a second."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.timing.seconds import SecondText


class SecondTextTests(SynchronousTestCase):
    def test_rendered_once_a_second(self):
        """Times within one second share one rendering; the next second renders again."""
        rendered = []
        text = SecondText(lambda second: rendered.append(second) or f"s{second}")
        self.assertEqual([text(10.0), text(10.5), text(10.99), text(11.2)],
                         ["s10", "s10", "s10", "s11"])
        self.assertEqual(rendered, [10, 11])
