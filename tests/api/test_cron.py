"""CronJob schedules, read as upstream's cron parser reads them."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.cron import parse_schedule


class ScheduleTests(SynchronousTestCase):
    def test_fields(self):
        """Stars, lists, ranges, steps and names give each field's allowed values."""
        schedule = parse_schedule("*/15 9-17 1,15 jan-mar MON-fri")
        minutes, hours, days, months, weekdays = schedule.fields
        self.assertEqual(sorted(minutes), [0, 15, 30, 45])
        self.assertEqual(sorted(hours), list(range(9, 18)))
        self.assertEqual(sorted(days), [1, 15])
        self.assertEqual(sorted(months), [1, 2, 3])
        self.assertEqual(sorted(weekdays), [1, 2, 3, 4, 5])
        self.assertEqual(schedule.stars, (False, False))
        self.assertEqual(sorted(parse_schedule("5/20 * ? * *").fields[0]), [5, 25, 45])
        self.assertEqual(parse_schedule("0 0 * * *").stars, (True, True))

    def test_descriptors(self):
        """Descriptors stand for their schedules; @every keeps its duration."""
        self.assertEqual(parse_schedule("@hourly").fields[0], frozenset([0]))
        self.assertEqual(sorted(parse_schedule("@weekly").fields[4]), [0])
        self.assertEqual(parse_schedule("@every 1h30m").every, "1h30m")

    def test_errors(self):
        """Bad schedules are refused with robfig/cron's messages."""
        cases = {
            "": "empty spec string",
            "* * * *": "expected exactly 5 fields, found 4: [* * * *]",
            "61 * * * *": "end of range (61) above maximum (59): 61",
            "* * 0 * *": "beginning of range (0) below minimum (1): 0",
            "5-1 * * * *": "beginning of range (5) beyond end of range (1): 5-1",
            "*/0 * * * *": "step of range should be a positive number: */0",
            "1-2-3 * * * *": "too many hyphens: 1-2-3",
            "*/2/3 * * * *": "too many slashes: */2/3",
            "x * * * *": 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax',
            "@sometimes": "unrecognized descriptor: @sometimes",
            "@every soon": 'failed to parse duration @every soon: time: invalid duration "soon"',
            "* * * * 7": "end of range (7) above maximum (6): 7",
        }
        for text, message in cases.items():
            with self.assertRaises(ValueError) as raised:
                parse_schedule(text)
            self.assertEqual(str(raised.exception), message, text)
